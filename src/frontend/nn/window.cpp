// Sliding windows over the last k dims: convolution, its transpose, and
// max, average and adaptive pooling (tensorjit/nn.h), with static channel
// and spatial dims (the leading batch dim may be symbolic). Convolutions
// are conv ops (ir/ops/conv.cpp; a transposed one over its input with
// zeros between the elements); pooling and the weight gradient are written
// over the IR's ops: one strided slice of the padded input per kernel offset.
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "frontend/emit.h"
#include "frontend/nn/common.h"
#include "tensorjit/ndarray.h"

namespace tj {

using namespace nn_detail;

namespace {

// The geometry of a window over k spatial dims.
struct Geometry {
  std::vector<int64_t> in, kernel, stride, dilation, pad_begin, pad_end, out;
  size_t k() const { return in.size(); }
};

// Kernel sizes are positive, and their product (the window's offsets, each
// lowered to a slice of its own) is at most 4096.
void check_kernel(const char* op, const std::vector<int64_t>& kernel) {
  constexpr int64_t kMaxTaps = 4096;
  int64_t taps = 1;
  for (int64_t k : kernel) {
    if (k < 1) fail(op, "kernel sizes must be positive");
    taps *= k;  // at most kMaxTaps * k: no overflow
    if (taps > kMaxTaps)
      unsupported(op, "a kernel of more than " + std::to_string(kMaxTaps) + " offsets is not supported (each is lowered to a slice of its own)");
  }
}

// Strides, dilations and pads far from overflow (spatial sizes are far smaller).
void check_range(const char* op, std::initializer_list<const std::vector<int64_t>*> lists) {
  constexpr int64_t kMax = int64_t{1} << 31;
  for (const auto* l : lists)
    for (int64_t v : *l)
      if (v < -kMax || v > kMax) fail(op, "a stride, dilation or pad of " + std::to_string(v) + " is out of range");
}

// The window of `kernel` over `in` as the options say. With ceil_mode the
// last window may run past the end pad (as long as it starts inside the
// input or the begin pad): pad_end grows to hold it.
Geometry geometry(const char* op, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                  const std::vector<int64_t>& dilation, const std::vector<int64_t>& pad_begin, const std::vector<int64_t>& pad_end, bool ceil_mode) {
  check_kernel(op, kernel);
  size_t n = in.size();
  Geometry g{in, kernel, per_dim(op, "stride", stride, n, 1), per_dim(op, "dilation", dilation, n, 1), per_dim(op, "padding", pad_begin, n, 0),
             per_dim(op, "padding", pad_end, n, 0), {}};
  check_range(op, {&g.stride, &g.dilation, &g.pad_begin, &g.pad_end});
  for (size_t i = 0; i < n; ++i) {
    if (g.stride[i] < 1 || g.dilation[i] < 1) fail(op, "strides and dilations must be positive");
    if (g.pad_begin[i] < 0 || g.pad_end[i] < 0) fail(op, "negative padding");
    int64_t span = (kernel[i] - 1) * g.dilation[i] + 1;
    int64_t room = in[i] + g.pad_begin[i] + g.pad_end[i] - span;
    if (room < 0) fail(op, "the kernel (" + std::to_string(span) + " with dilation) is larger than the padded input (" + std::to_string(in[i] + g.pad_begin[i] + g.pad_end[i]) + ")");
    int64_t out = (ceil_mode ? (room + g.stride[i] - 1) / g.stride[i] : room / g.stride[i]) + 1;
    if (ceil_mode && (out - 1) * g.stride[i] >= in[i] + g.pad_begin[i]) --out;
    g.pad_end[i] += std::max<int64_t>((out - 1) * g.stride[i] + span - (in[i] + g.pad_begin[i] + g.pad_end[i]), 0);
    g.out.push_back(out);
  }
  return g;
}

// The last k dims of x (static; else UnsupportedOperand).
std::vector<int64_t> spatial_of(const char* op, const Tensor& x, size_t k) {
  if (static_cast<size_t>(x.rank()) < k + 1)
    fail(op, "the input " + x.type().str() + " needs " + std::to_string(k) + " spatial dims and at least one before them");
  std::vector<int64_t> s;
  for (int64_t i = x.rank() - static_cast<int64_t>(k); i < x.rank(); ++i) s.push_back(static_dim(op, x, i));
  return s;
}

// x padded on its last k dims with `fill` (a scalar).
Tensor pad_spatial(const Tensor& x, const Geometry& g, const Tensor& fill) {
  Tensor r = x;
  int64_t first = x.rank() - static_cast<int64_t>(g.k());
  for (size_t i = 0; i < g.k(); ++i) {
    if (g.pad_begin[i] <= 0 && g.pad_end[i] <= 0) continue;
    int64_t axis = first + static_cast<int64_t>(i);
    std::vector<Tensor> parts;
    auto block = [&](int64_t len) {
      Shape s = r.shape();
      s[static_cast<size_t>(axis)] = Dim(len);
      return expand(fill, s);
    };
    if (g.pad_begin[i] > 0) parts.push_back(block(g.pad_begin[i]));
    parts.push_back(r);
    if (g.pad_end[i] > 0) parts.push_back(block(g.pad_end[i]));
    r = concat(parts, axis);
  }
  return r;
}

// Per kernel offset (row-major over the kernel), the padded input under it
// at every output position: x's leading dims, then out.. .
std::vector<Tensor> windows(const Tensor& padded, const Geometry& g) {
  std::vector<Tensor> r;
  size_t n = g.k();
  int64_t first = padded.rank() - static_cast<int64_t>(n);
  std::vector<int64_t> off(n, 0);
  for (;;) {
    Tensor s = padded;
    for (size_t i = 0; i < n; ++i) {
      int64_t start = off[i] * g.dilation[i];
      s = slice(s, first + static_cast<int64_t>(i), Dim(start), Dim(start + (g.out[i] - 1) * g.stride[i] + 1), g.stride[i]);
    }
    r.push_back(s);
    size_t i = n;
    while (i > 0 && ++off[i - 1] == g.kernel[i - 1]) off[--i] = 0;
    if (i == 0) return r;
  }
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// The sum, at every position of the input, of the window values per kernel offset (below).
Tensor windows_adjoint(const std::function<Tensor(int64_t tap)>& at, const Geometry& g);

// The windows of x [N, C, d..] under geometry g as columns: [N, groups,
// C/groups * taps, P] (P the output positions).
Tensor columns(const Tensor& x, const Geometry& g, int64_t ch, int64_t groups) {
  int64_t taps = product(g.kernel), pos = product(g.out);
  std::vector<Tensor> cols = windows(pad_spatial(x, g, x.tracer()->scalar(0, x.dtype())), g);
  for (Tensor& t : cols) t = unsqueeze(t, {2});
  // [N, C, taps, out..] -> [N, g, C/g * taps, P].
  return reshape(cols.size() == 1 ? cols[0] : concat(cols, 2), {x.shape()[0], Dim(groups), Dim(ch / groups * taps), Dim(pos)});
}

// The convolution of x [N, C, d..] with w [M, C/g, k..] over geometry g, plus
// the bias [M] when defined: one conv op (ir/ops/conv.cpp).
Tensor conv_op(const Tensor& x, const Tensor& w, const Tensor& bias, const Geometry& g, int64_t groups) {
  std::vector<Tensor> operands{x, w};
  if (bias.defined()) operands.push_back(bias);
  return emit(*x.tracer(), Op::conv, operands,
              {{"stride", g.stride}, {"dilation", g.dilation}, {"pad_begin", g.pad_begin}, {"pad_end", g.pad_end}, {"groups", groups}});
}

// Runs f on x with a batch dim added when x is unbatched ([C, d..]).
template <class F>
Tensor batched(const Tensor& x, size_t k, F f) {
  if (static_cast<size_t>(x.rank()) == k + 1) return squeeze(f(unsqueeze(x, {0})), {0});
  return f(x);
}

}  // namespace

Tensor conv(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvOptions& o) {
  const char* op = "conv";
  if (w.rank() < 3) fail(op, "the weights must be [M, C/groups, k..] with at least one spatial dim, got " + w.type().str());
  size_t k = static_cast<size_t>(w.rank() - 2);
  if (static_cast<size_t>(x.rank()) != k + 2 && static_cast<size_t>(x.rank()) != k + 1)
    fail(op, "the input " + x.type().str() + " does not match the weights " + w.type().str());
  std::vector<int64_t> ws;
  for (int64_t i = 0; i < w.rank(); ++i) ws.push_back(static_dim(op, w, i));
  return batched(x, k, [&](const Tensor& xb) {
    int64_t ch = static_dim(op, xb, 1), m = ws[0], groups = o.groups;
    if (groups < 1 || ch % groups != 0 || m % groups != 0 || ws[1] != ch / groups)
      fail(op, "input channels " + std::to_string(ch) + " and weights " + w.type().str() + " do not match groups " + std::to_string(groups));
    std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
    Geometry g = geometry(op, spatial_of(op, xb, k), kernel, o.stride, o.dilation, o.pad_begin, o.pad_end, false);
    if (bias.defined() && (bias.rank() != 1 || bias.shape()[0] != Dim(m))) return conv_op(xb, w, {}, g, groups) + per_channel(op, bias, xb.rank());
    return conv_op(xb, w, bias, g, groups);
  });
}

// Each weight's gradient sums, over the batch and the output positions,
// the output's gradient times the input under that weight: the columns of
// the input against the gradient, one product per group.
Tensor conv_weight_grad(const Tensor& x, const Tensor& grad, const std::vector<int64_t>& kernel, const ConvOptions& o) {
  const char* op = "conv_weight_grad";
  size_t k = kernel.size();
  if (k == 0 || static_cast<size_t>(x.rank()) != k + 2 || grad.rank() != x.rank())
    fail(op, "the input " + x.type().str() + " and the gradient " + grad.type().str() + " must be [N, C, d..] and [N, M, o..] for a kernel of " + std::to_string(k) + " dims");
  int64_t ch = static_dim(op, x, 1), m = static_dim(op, grad, 1), groups = o.groups;
  if (groups < 1 || ch % groups != 0 || m % groups != 0) fail(op, "channels " + std::to_string(ch) + " and " + std::to_string(m) + " do not split into " + std::to_string(groups) + " groups");
  Geometry g = geometry(op, spatial_of(op, x, k), kernel, o.stride, o.dilation, o.pad_begin, o.pad_end, false);
  for (size_t i = 0; i < k; ++i)
    if (grad.shape()[i + 2] != Dim(g.out[i])) fail(op, "the gradient " + grad.type().str() + " does not match the convolution's output");
  int64_t taps = product(g.kernel), pos = product(g.out);
  const Dim n = x.shape()[0];
  // Columns [N, g, C/g taps, P] -> [g, N P, C/g taps]; gradient [N, M, P] -> [g, M/g, N P].
  Tensor col = reshape(permute(columns(x, g, ch, groups), {1, 0, 3, 2}), {Dim(groups), n * Dim(pos), Dim(ch / groups * taps)});
  Tensor gm = reshape(permute(reshape(grad, {n, Dim(groups), Dim(m / groups), Dim(pos)}), {1, 2, 0, 3}), {Dim(groups), Dim(m / groups), n * Dim(pos)});
  Shape ws{Dim(m), Dim(ch / groups)};
  for (int64_t kk : kernel) ws.push_back(Dim(kk));
  return reshape(matmul(gm, col), ws);
}

// As a convolution: the input with stride - 1 zeros between its elements,
// padded by span - 1 - pad on each side (plus output_padding at the end;
// negative: cropped), with the weights' spatial dims flipped and their
// channel dims swapped per group.
Tensor conv_transpose(const Tensor& x_, const Tensor& w, const Tensor& bias, const ConvTransposeOptions& o) {
  const char* op = "conv_transpose";
  if (w.rank() < 3) fail(op, "the weights must be [C, M/groups, k..] with at least one spatial dim, got " + w.type().str());
  size_t sp = static_cast<size_t>(w.rank() - 2);
  if (static_cast<size_t>(x_.rank()) != sp + 2 && static_cast<size_t>(x_.rank()) != sp + 1)
    fail(op, "the input " + x_.type().str() + " does not match the weights " + w.type().str());
  std::vector<int64_t> ws;
  for (int64_t i = 0; i < w.rank(); ++i) ws.push_back(static_dim(op, w, i));
  return batched(x_, sp, [&](Tensor x) {
    std::vector<int64_t> xs = spatial_of(op, x, sp);
    int64_t g = o.groups, ch = static_dim(op, x, 1);
    if (g < 1 || ch % g != 0 || ws[0] != ch) fail(op, "input channels " + std::to_string(ch) + " do not match the weights " + w.type().str());
    int64_t m = ws[1] * g;
    std::vector<int64_t> ks(ws.begin() + 2, ws.end());
    check_kernel(op, ks);
    std::vector<int64_t> stride = per_dim(op, "stride", o.stride, sp, 1), dil = per_dim(op, "dilation", o.dilation, sp, 1);
    std::vector<int64_t> outpad = per_dim(op, "output_padding", o.output_padding, sp, 0);
    std::vector<int64_t> pb = per_dim(op, "padding", o.pad_begin, sp, 0), pe = per_dim(op, "padding", o.pad_end, sp, 0);
    check_range(op, {&stride, &dil, &outpad, &pb, &pe});
    for (size_t i = 0; i < sp; ++i)
      if (stride[i] < 1 || dil[i] < 1) fail(op, "strides and dilations must be positive");
    // Zeros between the elements.
    for (size_t i = 0; i < sp; ++i) {
      int64_t axis = static_cast<int64_t>(i) + 2, len = xs[i], s = stride[i];
      if (s == 1 || len == 0) continue;
      Tensor col = unsqueeze(x, {axis + 1});
      Shape zs = col.shape();
      zs[static_cast<size_t>(axis + 1)] = Dim(s - 1);
      Shape merged = x.shape();
      merged[static_cast<size_t>(axis)] = Dim(len * s);
      x = slice(reshape(concat({col, expand(x.tracer()->scalar(0, x.dtype()), zs)}, axis + 1), merged), axis, Dim(0), Dim((len - 1) * s + 1));
    }
    // Pad (or crop) to span - 1 - pad each side.
    Geometry geo;
    for (size_t i = 0; i < sp; ++i) {
      int64_t axis = static_cast<int64_t>(i) + 2, span = (ks[i] - 1) * dil[i] + 1;
      int64_t b = span - 1 - pb[i], e = span - 1 - pe[i] + outpad[i];
      int64_t len = (xs[i] - 1) * stride[i] + 1;
      if (xs[i] == 0) len = 0;
      if (b < 0) x = slice(x, axis, Dim(std::min(-b, len)), Dim(len)), len = std::max<int64_t>(len + b, 0), b = 0;
      if (e < 0) x = slice(x, axis, Dim(0), Dim(std::max<int64_t>(len + e, 0))), len = std::max<int64_t>(len + e, 0), e = 0;
      int64_t out = len + b + e - span + 1;
      if (out < 0) fail(op, "the result would have a negative size");
      geo.in.push_back(len), geo.kernel.push_back(ks[i]), geo.stride.push_back(1), geo.dilation.push_back(dil[i]);
      geo.pad_begin.push_back(b), geo.pad_end.push_back(e), geo.out.push_back(out);
    }
    // [C, M/g, k..] -> [g, C/g, M/g, k..] -> [g, M/g, C/g, k..] -> [M, C/g, k..], flipped.
    std::vector<int64_t> perm = {0, 2, 1};
    Shape grouped{Dim(g), Dim(ch / g), Dim(m / g)}, back{Dim(m), Dim(ch / g)};
    for (size_t i = 0; i < sp; ++i) perm.push_back(static_cast<int64_t>(i) + 3), grouped.push_back(Dim(ks[i])), back.push_back(Dim(ks[i]));
    Tensor wf = reshape(permute(reshape(w, grouped), perm), back);
    std::vector<int64_t> spatial_axes;
    for (size_t i = 0; i < sp; ++i) spatial_axes.push_back(static_cast<int64_t>(i) + 2);
    wf = flip(wf, spatial_axes);
    for (int64_t o_ : geo.out)
      if (o_ == 0) {  // an empty result: no window to compute
        Shape s{x.shape()[0], Dim(m)};
        for (int64_t d : geo.out) s.push_back(Dim(d));
        return expand(x.tracer()->scalar(0, x.dtype()), s);
      }
    Tensor y = conv_op(x, wf, {}, geo, g);
    return bias.defined() ? y + per_channel(op, bias, y.rank()) : y;
  });
}

namespace {

Geometry pool_geometry(const char* op, const Tensor& x, const PoolOptions& o) {
  if (o.kernel.empty()) fail(op, "the kernel size is required");
  return geometry(op, spatial_of(op, x, o.kernel.size()), o.kernel, o.stride, o.dilation, o.pad_begin, o.pad_end, o.ceil_mode);
}

}  // namespace

Tensor max_pool(const Tensor& x, const PoolOptions& o) {
  Geometry g = pool_geometry("max_pool", x, o);
  std::vector<Tensor> ws = windows(pad_spatial(x, g, x.tracer()->scalar(lowest(x.dtype()), x.dtype())), g);
  Tensor r = ws[0];
  for (size_t i = 1; i < ws.size(); ++i) r = maximum(r, ws[i]);
  return r;
}

ValuesAndIndices max_pool_with_indices(const Tensor& x, const PoolOptions& o, bool column_major) {
  const char* op = "max_pool_with_indices";
  Geometry g = pool_geometry(op, x, o);
  std::vector<Tensor> ws = windows(pad_spatial(x, g, x.tracer()->scalar(lowest(x.dtype()), x.dtype())), g);
  // The flat index of every position of a plane, broadcast over the leading dims.
  int64_t plane = product(g.in);
  std::vector<int64_t> at(static_cast<size_t>(plane));
  for (int64_t f = 0; f < plane; ++f) {
    int64_t rest = f, idx = 0, stride = 1;
    std::vector<int64_t> coord(g.k());
    for (size_t d = g.k(); d-- > 0;) coord[d] = rest % g.in[d], rest /= g.in[d];
    if (column_major)
      for (size_t d = 0; d < g.k(); ++d) idx += coord[d] * stride, stride *= g.in[d];
    else
      idx = f;
    at[static_cast<size_t>(f)] = idx;
  }
  Shape plane_shape(static_cast<size_t>(x.rank()) - g.k(), Dim(1));
  for (int64_t d : g.in) plane_shape.push_back(Dim(d));
  Tensor flat = reshape(int_constant(x, at), plane_shape);
  std::vector<Tensor> pos = windows(pad_spatial(flat, g, x.tracer()->scalar(-1, DType::i64)), g);
  Tensor best = ws[0], where_ = pos[0];
  for (size_t i = 1; i < ws.size(); ++i) {
    // The first maximum stays; a NaN replaces it (torch's kernels: NaN is the maximum).
    Tensor later = is_float(x.dtype()) ? logical_or(gt(ws[i], best), ne(ws[i], ws[i])) : gt(ws[i], best);
    best = where(later, ws[i], best);
    where_ = where(later, pos[i], where_);
  }
  Shape full = best.shape();
  return {best, expand(where_, full)};
}

namespace {

// The sum of each window of t padded (zeros) as `pads` says.
Tensor pooled_sum(const Tensor& t, const Geometry& pads, const Geometry& g) {
  std::vector<Tensor> ws = windows(pad_spatial(t, pads, t.tracer()->scalar(0, t.dtype())), g);
  Tensor r = ws[0];
  for (size_t i = 1; i < ws.size(); ++i) r = r + ws[i];
  return r;
}

// What each window of avg_pool is divided by, [1.., out..]: with
// count_include_pad, its positions in the input and its declared pads (not
// the room ceil_mode adds), else its positions in the input.
Tensor window_counts(const char* op, const Tensor& x, const Geometry& g, const PoolOptions& o, bool count_include_pad) {
  const size_t lead = static_cast<size_t>(x.rank()) - g.k();
  Tensor one = x.tracer()->scalar(1, x.dtype());
  Shape counted(lead, Dim(1));
  Geometry extra = g;
  if (count_include_pad) {
    // Ones over the input and its declared pads; zeros where ceil_mode's
    // last windows reach beyond them.
    for (size_t i = 0; i < g.k(); ++i) {
      int64_t declared_end = per_dim(op, "padding", o.pad_end, g.k(), 0)[i];
      counted.push_back(Dim(g.in[i] + g.pad_begin[i] + declared_end));
      extra.pad_begin[i] = 0;
      extra.pad_end[i] = g.pad_end[i] - declared_end;
    }
  } else {
    for (int64_t d : g.in) counted.push_back(Dim(d));
  }
  return pooled_sum(expand(one, counted), extra, g);
}

void check_pool_float(const char* op, const Tensor& x) {
  if (!is_float(x.dtype())) fail(op, "average pooling of " + x.type().str() + " (floats only)");
}

}  // namespace

Tensor avg_pool(const Tensor& x, const PoolOptions& o, bool count_include_pad, int64_t divisor) {
  const char* op = "avg_pool";
  check_pool_float(op, x);
  Geometry g = pool_geometry(op, x, o);
  Tensor s = pooled_sum(x, g, g);
  if (divisor != 0) return s / static_cast<double>(divisor);
  return s / window_counts(op, x, g, o, count_include_pad);
}

// The adjoint of avg_pool: each window's gradient, divided as the forward
// divides, added back at every position of the window: per kernel offset,
// the gradient spread out by the stride (zeros between) and shifted to the
// offset in the padded input; the pads cut off at the end.
Tensor avg_pool_grad(const Tensor& grad, const Tensor& x, const PoolOptions& o, bool count_include_pad, int64_t divisor) {
  const char* op = "avg_pool_grad";
  check_pool_float(op, x);
  Geometry g = pool_geometry(op, x, o);
  if (grad.rank() != x.rank()) fail(op, "the gradient " + grad.type().str() + " does not match the input " + x.type().str());
  const int64_t first = x.rank() - static_cast<int64_t>(g.k());
  for (size_t i = 0; i < g.k(); ++i)
    if (grad.shape()[static_cast<size_t>(first) + i] != Dim(g.out[i])) fail(op, "the gradient " + grad.type().str() + " does not match the pooling's output");
  Tensor gd = divisor != 0 ? grad / static_cast<double>(divisor) : grad / window_counts(op, x, g, o, count_include_pad);
  return windows_adjoint([&](int64_t) { return gd; }, g);
}

namespace {

// The sum, at every position of the input, of the window values (per
// kernel offset, in windows()' order, over [.., out..]) that cover it.
Tensor windows_adjoint(const std::function<Tensor(int64_t tap)>& at, const Geometry& g) {
  std::optional<Tensor> acc;
  std::vector<int64_t> off(g.k(), 0);
  for (int64_t tap = 0;; ++tap) {
    Tensor t = at(tap);
    const int64_t first = t.rank() - static_cast<int64_t>(g.k());
    Tensor zero = t.tracer()->scalar(0, t.dtype());
    for (size_t i = 0; i < g.k(); ++i) {
      int64_t axis = first + static_cast<int64_t>(i), s = g.stride[i], len = g.out[i];
      if (s != 1 && len != 0) {  // spread by the stride: [.., (out - 1) * stride + 1, ..]
        Tensor col = unsqueeze(t, {axis + 1});
        Shape zs = col.shape();
        zs[static_cast<size_t>(axis + 1)] = Dim(s - 1);
        Shape merged = t.shape();
        merged[static_cast<size_t>(axis)] = Dim(len * s);
        t = slice(reshape(concat({col, expand(zero, zs)}, axis + 1), merged), axis, Dim(0), Dim((len - 1) * s + 1));
      }
      int64_t padded = g.in[i] + g.pad_begin[i] + g.pad_end[i], begin = off[i] * g.dilation[i];
      int64_t spread = len == 0 ? 0 : (len - 1) * s + 1;
      std::vector<int64_t> b(static_cast<size_t>(t.rank()), 0), e = b;
      b[static_cast<size_t>(axis)] = begin - g.pad_begin[i];  // shifted, then the pads cut off (negative: cropped)
      e[static_cast<size_t>(axis)] = padded - begin - spread - g.pad_end[i];
      t = pad(t, b, e, PadMode::constant, zero);
    }
    acc = acc ? *acc + t : t;
    size_t i = g.k();
    while (i > 0 && ++off[i - 1] == g.kernel[i - 1]) off[--i] = 0;
    if (i == 0) break;
  }
  return *acc;
}

}  // namespace

// Column l of input [N, C * taps, L] is the window at output position l:
// its values added back where they were taken from.
Tensor col2im(const Tensor& cols, const std::vector<int64_t>& image, const std::vector<int64_t>& kernel, const ConvOptions& o) {
  const char* op = "col2im";
  size_t k = image.size();
  if (k == 0 || kernel.size() != k) fail(op, "the image and kernel sizes differ in rank");
  if (cols.rank() != 3 && cols.rank() != 2) fail(op, "the input must be [N, C * kernel, L] (or unbatched), got " + cols.type().str());
  Geometry g = geometry(op, image, kernel, o.stride, o.dilation, o.pad_begin, o.pad_end, false);
  int64_t taps = product(kernel), pos = product(g.out);
  Tensor x = cols.rank() == 2 ? unsqueeze(cols, {0}) : cols;
  int64_t ck = static_dim(op, x, 1), l = static_dim(op, x, 2);
  if (ck % taps) fail(op, "the input's " + std::to_string(ck) + " rows are not channels times the kernel's " + std::to_string(taps) + " offsets");
  if (l != pos) fail(op, "the input has " + std::to_string(l) + " columns, the windows " + std::to_string(pos));
  int64_t c = ck / taps;
  Shape s{x.shape()[0], Dim(c), Dim(taps)};
  for (int64_t d : g.out) s.push_back(Dim(d));
  Tensor w = reshape(x, s);  // [N, C, taps, out..]
  Tensor r = windows_adjoint([&](int64_t tap) { return squeeze(slice(w, 2, Dim(tap), Dim(tap + 1)), {2}); }, g);
  return cols.rank() == 2 ? squeeze(r, {0}) : r;
}

namespace {

// Output i of a dim of n adaptively pooled to `out` reads [start, end).
int64_t adaptive_start(int64_t i, int64_t n, int64_t out) { return (i * n) / out; }
int64_t adaptive_end(int64_t i, int64_t n, int64_t out) { return ((i + 1) * n + out - 1) / out; }

std::vector<int64_t> adaptive_check(const char* op, const Tensor& x, const std::vector<int64_t>& out) {
  if (out.empty()) fail(op, "the output size is required");
  std::vector<int64_t> in = spatial_of(op, x, out.size());
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] < 1 || (in[i] == 0)) fail(op, "output size " + std::to_string(out[i]) + " for an input dim of " + std::to_string(in[i]));
  return in;
}

}  // namespace

// Separable: the mean over a box is the mean, dim by dim, of the means
// along each. A dim that divides evenly is a reshape and a mean; another is
// a product with its [n, out] matrix of 1/count weights.
Tensor adaptive_avg_pool(const Tensor& x, const std::vector<int64_t>& out) {
  const char* op = "adaptive_avg_pool";
  if (!is_float(x.dtype())) fail(op, "average pooling of " + x.type().str() + " (floats only)");
  std::vector<int64_t> in = adaptive_check(op, x, out);
  Tensor r = x;
  int64_t first = x.rank() - static_cast<int64_t>(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t axis = first + static_cast<int64_t>(i), n = in[i], o = out[i];
    if (n == o) continue;
    if (n % o == 0) {
      Shape s = r.shape();
      s[static_cast<size_t>(axis)] = Dim(o);
      s.insert(s.begin() + axis + 1, Dim(n / o));
      r = mean(reshape(r, s), {axis + 1});
      continue;
    }
    NDArray wts(r.dtype() == DType::f64 ? DType::f64 : DType::f32, {n, o});
    for (int64_t j = 0; j < o; ++j) {
      int64_t b = adaptive_start(j, n, o), e = adaptive_end(j, n, o);
      for (int64_t p = b; p < e; ++p) wts.set(p * o + j, 1.0 / static_cast<double>(e - b));
    }
    Tensor m = x.tracer()->constant(wts);
    if (m.dtype() != r.dtype()) m = cast(m, r.dtype());
    Tensor moved = transpose(r, axis, r.rank() - 1);
    r = transpose(matmul(moved, m), axis, r.rank() - 1);
  }
  return r;
}

// The adjoint of adaptive_avg_pool, dim by dim: each output's gradient
// divided among the positions of its window (the transposed matrix).
Tensor adaptive_avg_pool_grad(const Tensor& grad, const Tensor& x, const std::vector<int64_t>& out) {
  const char* op = "adaptive_avg_pool_grad";
  if (!is_float(x.dtype())) fail(op, "average pooling of " + x.type().str() + " (floats only)");
  std::vector<int64_t> in = adaptive_check(op, x, out);
  if (grad.rank() != x.rank()) fail(op, "the gradient " + grad.type().str() + " does not match the input " + x.type().str());
  Tensor r = grad;
  int64_t first = x.rank() - static_cast<int64_t>(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t axis = first + static_cast<int64_t>(i), n = in[i], o = out[i];
    if (r.shape()[static_cast<size_t>(axis)] != Dim(o)) fail(op, "the gradient " + grad.type().str() + " does not match the output sizes");
    NDArray wts(r.dtype() == DType::f64 ? DType::f64 : DType::f32, {o, n});
    for (int64_t j = 0; j < o; ++j) {
      int64_t b = adaptive_start(j, n, o), e = adaptive_end(j, n, o);
      for (int64_t p = b; p < e; ++p) wts.set(j * n + p, 1.0 / static_cast<double>(e - b));
    }
    Tensor m = x.tracer()->constant(wts);
    if (m.dtype() != r.dtype()) m = cast(m, r.dtype());
    r = transpose(matmul(transpose(r, axis, r.rank() - 1), m), axis, r.rank() - 1);
  }
  return r;
}

// Windows of different lengths: along each dim, a gather of every window's
// positions padded to the longest by repeating its last one (which changes
// neither the maximum nor where its first occurrence is).
ValuesAndIndices adaptive_max_pool(const Tensor& x, const std::vector<int64_t>& out) {
  const char* op = "adaptive_max_pool";
  std::vector<int64_t> in = adaptive_check(op, x, out);
  size_t k = out.size();
  int64_t first = x.rank() - static_cast<int64_t>(k);
  Tensor r = x;
  std::vector<int64_t> len(k);
  std::vector<std::vector<int64_t>> src(k);  // per dim: [out, len] source positions
  for (size_t i = 0; i < k; ++i) {
    int64_t n = in[i], o = out[i], l = 0;
    for (int64_t j = 0; j < o; ++j) l = std::max(l, adaptive_end(j, n, o) - adaptive_start(j, n, o));
    len[i] = l;
    for (int64_t j = 0; j < o; ++j)
      for (int64_t p = 0; p < l; ++p) src[i].push_back(std::min(adaptive_start(j, n, o) + p, adaptive_end(j, n, o) - 1));
    // Dim `axis` of r becomes [o, l] (at 2i positions after `first`: the
    // dims before were split already).
    int64_t axis = first + 2 * static_cast<int64_t>(i);
    r = take_static(r, axis, src[i]);
    Shape s = r.shape();
    s[static_cast<size_t>(axis)] = Dim(o);
    s.insert(s.begin() + axis + 1, Dim(l));
    r = reshape(r, s);
  }
  // [.., o1, l1, o2, l2, ..] -> [.., o1, o2, .., l1 * l2 * ..].
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < first; ++d) perm.push_back(d);
  for (size_t i = 0; i < k; ++i) perm.push_back(first + 2 * static_cast<int64_t>(i));
  for (size_t i = 0; i < k; ++i) perm.push_back(first + 2 * static_cast<int64_t>(i) + 1);
  r = permute(r, perm);
  Shape s(r.shape().begin(), r.shape().begin() + first + static_cast<int64_t>(k));
  s.push_back(Dim(product(len)));
  r = reshape(r, s);
  int64_t last = r.rank() - 1;
  Tensor values = amax(r, {last});
  Tensor at = argmax(r, last, true);
  // The plane index of window position (o.., l..): a constant table [o.., L].
  std::vector<int64_t> table;
  int64_t outs = product(out), taps = product(len);
  for (int64_t f = 0; f < outs; ++f)
    for (int64_t t = 0; t < taps; ++t) {
      int64_t of = f, tf = t, flat = 0;
      std::vector<int64_t> oc(k), tc(k);
      for (size_t d = k; d-- > 0;) oc[d] = of % out[d], of /= out[d], tc[d] = tf % len[d], tf /= len[d];
      for (size_t d = 0; d < k; ++d) flat = flat * in[d] + src[d][static_cast<size_t>(oc[d] * len[d] + tc[d])];
      table.push_back(flat);
    }
  Shape ts(static_cast<size_t>(first), Dim(1));
  for (int64_t o : out) ts.push_back(Dim(o));
  ts.push_back(Dim(taps));
  Tensor tab = expand(reshape(int_constant(x, table), ts), r.shape());
  Tensor idx = squeeze(take_along(tab, at, last), {last});
  return {values, idx};
}

}  // namespace tj
