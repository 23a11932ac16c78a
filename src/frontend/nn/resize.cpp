// Resizing the last k dims (tensorjit/nn.h): nearest and (bi/tri)linear,
// with torch's source positions. Each dim is a gather with constant
// indices; linear blends two of them with constant weights, the last dim
// first (the order torch sums the corners in).
#include <cmath>

#include "frontend/nn/common.h"
#include "tensorjit/ndarray.h"

namespace tj {

using namespace nn_detail;

namespace {

std::vector<int64_t> resize_check(const char* op, const Tensor& x, const std::vector<int64_t>& out, const std::vector<double>& scales) {
  if (out.empty()) fail(op, "the output size is required");
  if (!scales.empty() && scales.size() != out.size()) fail(op, std::to_string(scales.size()) + " scales for " + std::to_string(out.size()) + " dims");
  if (static_cast<size_t>(x.rank()) < out.size() + 1) fail(op, "the input " + x.type().str() + " needs " + std::to_string(out.size()) + " spatial dims and one before");
  std::vector<int64_t> in;
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t axis = x.rank() - static_cast<int64_t>(out.size()) + static_cast<int64_t>(i);
    in.push_back(static_dim(op, x, axis));
    if (out[i] < 1 || in.back() < 1) fail(op, "resizing a dim of " + std::to_string(in.back()) + " to " + std::to_string(out[i]));
    if (out[i] > (int64_t{1} << 24)) fail(op, "an output size of " + std::to_string(out[i]) + " is out of range");
  }
  return in;
}

// in / out, or 1 / scale when given (torch computes these in float).
float ratio(int64_t in, int64_t out, const std::vector<double>& scales, size_t i) {
  if (!scales.empty() && scales[i] > 0) return static_cast<float>(1.0 / scales[i]);
  return static_cast<float>(in) / static_cast<float>(out);
}

}  // namespace

Tensor upsample_nearest(const Tensor& x, const std::vector<int64_t>& out, const std::vector<double>& scales) {
  const char* op = "upsample_nearest";
  std::vector<int64_t> in = resize_check(op, x, out, scales);
  Tensor r = x;
  int64_t first = x.rank() - static_cast<int64_t>(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (in[i] == out[i] && (scales.empty() || scales[i] <= 0 || scales[i] == 1.0)) continue;
    float s = ratio(in[i], out[i], scales, i);
    std::vector<int64_t> idx;
    for (int64_t o = 0; o < out[i]; ++o) idx.push_back(std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * s)), in[i] - 1));
    r = take_static(r, first + static_cast<int64_t>(i), idx);
  }
  return r;
}

Tensor upsample_linear(const Tensor& x, const std::vector<int64_t>& out, bool align_corners, const std::vector<double>& scales) {
  const char* op = "upsample_linear";
  if (!is_float(x.dtype())) fail(op, "linear resizing of " + x.type().str() + " (floats only)");
  std::vector<int64_t> in = resize_check(op, x, out, scales);
  Tensor r = x;
  int64_t first = x.rank() - static_cast<int64_t>(out.size());
  DType wt = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  for (size_t i = out.size(); i-- > 0;) {
    int64_t n = in[i], o = out[i], axis = first + static_cast<int64_t>(i);
    float s = align_corners ? (o > 1 ? static_cast<float>(n - 1) / static_cast<float>(o - 1) : 0.0f) : ratio(n, o, scales, i);
    std::vector<int64_t> i0, i1;
    NDArray l0(wt, {o}), l1(wt, {o});
    for (int64_t d = 0; d < o; ++d) {
      float src = align_corners ? s * static_cast<float>(d) : std::max(s * (static_cast<float>(d) + 0.5f) - 0.5f, 0.0f);
      int64_t lo = std::min(static_cast<int64_t>(src), n - 1);
      int64_t hi = lo + (lo < n - 1 ? 1 : 0);
      float lam = std::min(src - static_cast<float>(lo), 1.0f);
      i0.push_back(lo), i1.push_back(hi);
      l1.set(d, lam), l0.set(d, 1.0f - lam);
    }
    Shape ws(static_cast<size_t>(r.rank()) - static_cast<size_t>(axis), Dim(1));
    ws[0] = Dim(o);
    auto weight = [&](const NDArray& a) {
      Tensor t = reshape(x.tracer()->constant(a), ws);
      return t.dtype() == x.dtype() ? t : cast(t, x.dtype());
    };
    r = take_static(r, axis, i0) * weight(l0) + take_static(r, axis, i1) * weight(l1);
  }
  return r;
}

}  // namespace tj
