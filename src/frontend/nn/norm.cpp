// Normalization layers (tensorjit/nn.h): layer, batch (given or batch
// statistics) and group norm, with the statistics a backward pass or a
// running average needs. Population variance throughout.
#include "frontend/nn/common.h"

namespace tj {

using namespace nn_detail;

namespace {

// x normalized over `axes` (mean and var keep them as 1).
Normalized normalize_over(const Tensor& x, const std::vector<int64_t>& axes, double eps) {
  Tensor m = mean(x, axes, true), d = x - m;
  Tensor var = mean(d * d, axes, true);
  Tensor rstd = rsqrt(var + eps);
  return {d * rstd, m, var, rstd};
}

void check_float(const char* op, const Tensor& x) {
  if (!is_float(x.dtype())) fail(op, "normalization of " + x.type().str() + " (floats only)");
}

}  // namespace

Normalized layer_norm(const Tensor& x, int64_t first_axis, const Tensor& w, const Tensor& b, double eps) {
  const char* op = "layer_norm";
  check_float(op, x);
  if (x.rank() == 0) fail(op, "the input must have rank 1 or more");
  int64_t first = axis_of(op, first_axis, x.rank());
  Shape normalized(x.shape().begin() + first, x.shape().end());
  for (const Tensor* p : {&w, &b})
    if (p->defined() && p->shape() != normalized)
      fail(op, "weight and bias must be " + shape_str(normalized) + " (the normalized dims), got " + p->type().str());
  std::vector<int64_t> axes;
  for (int64_t i = first; i < x.rank(); ++i) axes.push_back(i);
  Normalized r = normalize_over(x, axes, eps);
  // The last dim alone with both weights: the fused op (one row-wise kernel).
  if (first == x.rank() - 1 && w.defined() && b.defined()) {
    r.y = tj::layer_norm(x, w, b, eps);
    return r;
  }
  if (w.defined()) r.y = r.y * w;
  if (b.defined()) r.y = r.y + b;
  return r;
}

Tensor batch_norm(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& mean_, const Tensor& var, double eps) {
  const char* op = "batch_norm";
  check_float(op, x);
  int64_t r = x.rank();
  Tensor y = (x - per_channel(op, mean_, r)) * per_channel(op, rsqrt(var + eps), r);
  if (w.defined()) y = y * per_channel(op, w, r);
  if (b.defined()) y = y + per_channel(op, b, r);
  return y;
}

Normalized batch_norm_train(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  const char* op = "batch_norm";
  check_float(op, x);
  int64_t r = x.rank();
  if (r < 2) fail(op, "the input must be [N, C, ..], got " + x.type().str());
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < r; ++i)
    if (i != 1) axes.push_back(i);
  Normalized n = normalize_over(x, axes, eps);
  if (w.defined()) n.y = n.y * per_channel(op, w, r);
  if (b.defined()) n.y = n.y + per_channel(op, b, r);
  Shape ch{x.shape()[1]};
  n.mean = reshape(n.mean, ch), n.var = reshape(n.var, ch), n.rstd = reshape(n.rstd, ch);
  return n;
}

Normalized group_norm(const Tensor& x, int64_t groups, const Tensor& w, const Tensor& b, double eps) {
  const char* op = "group_norm";
  check_float(op, x);
  if (x.rank() < 2) fail(op, "the input must be [N, C, ..], got " + x.type().str());
  int64_t c = static_dim(op, x, 1);
  if (groups < 1 || c % groups != 0) fail(op, std::to_string(c) + " channels do not split into " + std::to_string(groups) + " groups");
  // [N, C, rest..] -> [N, G, C/G * rest..], normalized over the last.
  Dim rest(1);
  for (int64_t i = 2; i < x.rank(); ++i) rest = rest * x.shape()[static_cast<size_t>(i)];
  const Dim n = x.shape()[0];
  Tensor g = reshape(x, {n, Dim(groups), Dim(c / groups) * rest});
  Normalized r = normalize_over(g, {2}, eps);
  r.y = reshape(r.y, x.shape());
  if (w.defined()) r.y = r.y * per_channel(op, w, x.rank());
  if (b.defined()) r.y = r.y + per_channel(op, b, x.rank());
  r.mean = squeeze(r.mean, {2}), r.var = squeeze(r.var, {2}), r.rstd = squeeze(r.rstd, {2});
  return r;
}

}  // namespace tj
