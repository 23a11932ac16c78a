#include "frontend/nn/common.h"

#include <cmath>

#include "tensorjit/ndarray.h"

namespace tj::nn_detail {

void fail(const char* op, const std::string& msg) { throw ShapeError(std::string(op) + ": " + msg); }
void unsupported(const char* op, const std::string& msg) { throw UnsupportedOperand(std::string(op) + ": " + msg); }

int64_t axis_of(const char* op, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) fail(op, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

int64_t static_dim(const char* op, const Tensor& x, int64_t axis) {
  const Dim& d = x.shape()[static_cast<size_t>(axis)];
  auto k = d.as_const();
  if (!k) unsupported(op, "dim " + std::to_string(axis) + " of " + x.type().str() + " must be static, it is " + d.str());
  return *k;
}

std::vector<int64_t> per_dim(const char* op, const char* what, const std::vector<int64_t>& given, size_t n, int64_t def) {
  if (given.empty()) return std::vector<int64_t>(n, def);
  if (given.size() == 1 && n > 1) return std::vector<int64_t>(n, given[0]);  // torch's int for every dim
  if (given.size() != n) fail(op, std::string(what) + " has " + std::to_string(given.size()) + " entries for " + std::to_string(n) + " spatial dims");
  return given;
}

Tensor int_constant(const Tensor& like, const std::vector<int64_t>& v) {
  return like.tracer()->constant(NDArray::of<int64_t>({static_cast<int64_t>(v.size())}, v));
}

Tensor take_static(const Tensor& x, int64_t axis, const std::vector<int64_t>& idx) { return gather(x, int_constant(x, idx), axis); }

Tensor dim_value(const Tensor& like, const Dim& d) {
  Tracer& t = *like.tracer();
  if (auto k = d.as_const()) return t.scalar(static_cast<double>(*k), DType::i64);
  return sum(expand(t.scalar(1, DType::i64), {d}), {0});  // the element count of [d]
}

Tensor per_channel(const char* op, const Tensor& p, int64_t rank) {
  if (p.rank() != 1) fail(op, "per-channel operands must be vectors, got " + p.type().str());
  if (rank < 2) fail(op, "the input needs rank 2 or more for per-channel operands");
  Shape s(static_cast<size_t>(rank - 1), Dim(1));
  s[0] = p.shape()[0];
  return reshape(p, s);
}

double lowest(DType dt) { return is_float(dt) ? -INFINITY : int_min(dt); }

Moved move_last(const Tensor& x, int64_t axis) {
  if (axis == x.rank() - 1) return {x, {}, false};
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != axis) perm.push_back(d);
  perm.push_back(axis);
  std::vector<int64_t> back(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) back[static_cast<size_t>(perm[k])] = static_cast<int64_t>(k);
  return {permute(x, perm), back, true};
}

Tensor move_back(const Moved& m, const Tensor& r) { return m.moved ? permute(r, m.back) : r; }

}  // namespace tj::nn_detail
