// Guards: the conditions under which a traced graph is valid, checked on
// every call before a cached entry runs. Each is one comparison on the
// arguments (a dtype, a rank, a size, a size's bucket, two sizes being equal,
// a plain value); a list of them is checked in order and the first that
// fails explains the miss.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "tensorjit/jit.h"

namespace tj {

struct Guard {
  enum class Kind { tensor_count, value_count, dtype, rank, size, size_range, sizes_equal, value };
  Kind kind = Kind::tensor_count;
  size_t tensor = 0;
  int axis = 0;
  int64_t lo = 0, hi = 0;  // size: == lo; size_range: lo < size <= hi; counts: == lo / >= lo
  size_t other_tensor = 0;  // sizes_equal
  int other_axis = 0;
  DType dtype = DType::f32;
  JitValue value;  // value: values[tensor] == value

  static Guard make(Kind k, size_t tensor = 0, int axis = 0, int64_t lo = 0, int64_t hi = 0) {
    Guard g;
    g.kind = k, g.tensor = tensor, g.axis = axis, g.lo = lo, g.hi = hi;
    return g;
  }

  bool pass(const std::vector<NDArray>& tensors, const std::vector<JitValue>& values) const;
  std::string str() const;
  // What the arguments have where this guard looks: "got 102".
  std::string got(const std::vector<NDArray>& tensors, const std::vector<JitValue>& values) const;
};

class Guards {
 public:
  void add(Guard g) { guards_.push_back(std::move(g)); }
  bool pass(const std::vector<NDArray>& tensors, const std::vector<JitValue>& values) const {
    for (const Guard& g : guards_)
      if (!g.pass(tensors, values)) return false;
    return true;
  }
  // "tensors[2].shape[2] == 101 failed (got 102)", or empty when every guard passes.
  std::string first_failure(const std::vector<NDArray>& tensors, const std::vector<JitValue>& values) const;
  const std::vector<Guard>& list() const { return guards_; }
  // One line per tensor ("tensors[2]: f32[1,2,(64,128],16]": exact sizes, or
  // a bucket's range), then the other guards one per line.
  std::vector<std::string> summary() const;

 private:
  std::vector<Guard> guards_;
};

std::string value_str(const JitValue& v);

}  // namespace tj
