// Adding a node to a trace: the one path from the tracing API's functions
// (src/frontend/tracer.cpp) and tensorjit's own tools to the graph being
// traced. Internal: users call tj::exp, tj::matmul, ... (tensorjit/tensor.h).
#pragma once

#include <vector>

#include "ir/graph.h"
#include "tensorjit/tensor.h"

namespace tj {

// While alive, `t` is the region being traced: ops on outer tensors alone
// trace into it (TracerAccess::emit).
class RegionScope {
 public:
  explicit RegionScope(Tracer* t);
  ~RegionScope();
  RegionScope(const RegionScope&) = delete;
  RegionScope& operator=(const RegionScope&) = delete;

 private:
  Tracer* outer_;
};

struct TracerAccess {
  static Tensor emit(Tracer& t, Op op, const std::vector<Tensor>& operands, const NamedAttrs& attrs);
};

// op(operands) {attrs} in t's graph; operands from enclosing traces are captured.
inline Tensor emit(Tracer& t, Op op, const std::vector<Tensor>& operands, const NamedAttrs& attrs = {}) {
  return TracerAccess::emit(t, op, operands, attrs);
}

}  // namespace tj
