// What the composite layers (tensorjit/nn.h) share: static sizes, axes and
// errors that name the layer.
#pragma once

#include <string>
#include <vector>

#include "tensorjit/nn.h"

namespace tj::nn_detail {

[[noreturn]] void fail(const char* op, const std::string& msg);         // ShapeError "op: msg"
[[noreturn]] void unsupported(const char* op, const std::string& msg);  // UnsupportedOperand "op: msg"

// `axis` in [-rank, rank), normalized.
int64_t axis_of(const char* op, int64_t axis, int64_t rank);
// The static size of x's dim `axis` (else UnsupportedOperand naming `op`).
int64_t static_dim(const char* op, const Tensor& x, int64_t axis);
// A per-dim list of length n: `given`, or n copies of `def` when empty.
std::vector<int64_t> per_dim(const char* op, const char* what, const std::vector<int64_t>& given, size_t n, int64_t def);
// An i64 constant vector in x's trace.
Tensor int_constant(const Tensor& like, const std::vector<int64_t>& v);
// x's elements idx (constant) along `axis`.
Tensor take_static(const Tensor& x, int64_t axis, const std::vector<int64_t>& idx);
// The value of a dim as an i64 scalar of like's trace (computed at run time when symbolic).
Tensor dim_value(const Tensor& like, const Dim& d);
// A vector [C] shaped to broadcast over dim 1 of a tensor of `rank` ([C, 1, ..]).
Tensor per_channel(const char* op, const Tensor& p, int64_t rank);
// The lowest value of a dtype (-inf for floats), for max-type padding.
double lowest(DType dt);
// x with `axis` moved last, and how to put it back.
struct Moved {
  Tensor x;
  std::vector<int64_t> back;  // the permutation that undoes it
  bool moved = false;         // false: the axis was last already
};
Moved move_last(const Tensor& x, int64_t axis);
Tensor move_back(const Moved& m, const Tensor& r);

}  // namespace tj::nn_detail
