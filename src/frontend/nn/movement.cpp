// Data movement over the IR's ops (tensorjit/nn.h): padding, flips,
// rolls, gathers and scatters along an axis, triangles.
#include <algorithm>

#include "frontend/nn/common.h"
#include "tensorjit/ndarray.h"

namespace tj {

using namespace nn_detail;

namespace {

// x with `begin` and `end` copies of fill (a scalar) around `axis`.
Tensor pad_constant(const Tensor& x, int64_t axis, int64_t begin, int64_t end, const Tensor& fill) {
  auto block = [&](int64_t len) {
    Shape s = x.shape();
    s[static_cast<size_t>(axis)] = Dim(len);
    return expand(fill, s);
  };
  std::vector<Tensor> parts;
  if (begin > 0) parts.push_back(block(begin));
  parts.push_back(x);
  if (end > 0) parts.push_back(block(end));
  return parts.size() == 1 ? x : concat(parts, axis);
}

// The source index of output position i in [-b, n + e) of a dim of n.
int64_t source_index(PadMode mode, int64_t i, int64_t n) {
  switch (mode) {
    case PadMode::edge: return std::clamp<int64_t>(i, 0, n - 1);
    case PadMode::wrap: return ((i % n) + n) % n;
    case PadMode::reflect: {  // period 2n - 2
      int64_t p = 2 * n - 2, j = ((i % p) + p) % p;
      return j >= n ? p - j : j;
    }
    case PadMode::constant: break;
  }
  return i;
}

}  // namespace

Tensor pad(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& end, PadMode mode, const Tensor& fill) {
  const char* op = "pad";
  if (begin.size() != static_cast<size_t>(x.rank()) || end.size() != begin.size())
    fail(op, std::to_string(begin.size()) + " begin and " + std::to_string(end.size()) + " end pads for " + x.type().str());
  Tensor f = fill.defined() ? fill : x.tracer()->scalar(0, x.dtype());
  if (f.rank() != 0) f = reshape(f, {});
  if (f.dtype() != x.dtype()) f = cast(f, x.dtype());
  Tensor r = x;
  for (int64_t axis = 0; axis < x.rank(); ++axis) {
    int64_t b = begin[static_cast<size_t>(axis)], e = end[static_cast<size_t>(axis)];
    if (b == 0 && e == 0) continue;
    constexpr int64_t kMax = int64_t{1} << 31;
    if (b < -kMax || b > kMax || e < -kMax || e > kMax) fail(op, "a pad of " + std::to_string(b < -kMax || b > kMax ? b : e) + " is out of range");
    if ((b < 0 || e < 0) && mode == PadMode::constant) {  // cropping
      const Dim& n = r.shape()[static_cast<size_t>(axis)];
      Dim start(std::max<int64_t>(-b, 0)), stop = n - Dim(std::max<int64_t>(-e, 0));
      if (n.as_const() && *n.as_const() + std::min<int64_t>(b, 0) + std::min<int64_t>(e, 0) < 0)
        fail(op, "pads " + std::to_string(b) + ", " + std::to_string(e) + " crop more than the dim of " + n.str());
      r = slice(r, axis, start, stop);
      b = std::max<int64_t>(b, 0), e = std::max<int64_t>(e, 0);
      if (b == 0 && e == 0) continue;
    }
    if (mode == PadMode::constant) {
      r = pad_constant(r, axis, b, e, f);
      continue;
    }
    // Each output position's source, over the whole dim (negative pads crop).
    int64_t n = static_dim(op, r, axis);
    if (n + b + e < 0) fail(op, "pads " + std::to_string(b) + ", " + std::to_string(e) + " crop more than the dim of " + std::to_string(n));
    if (n == 0 && n + b + e > 0) fail(op, "padding an empty dim by repeating its elements");
    if (mode == PadMode::reflect && n == 1 && (b > 0 || e > 0)) fail(op, "reflect padding of a dim of 1");
    std::vector<int64_t> idx;
    for (int64_t i = -b; i < n + e; ++i) idx.push_back(source_index(mode, i, n));
    r = take_static(r, axis, idx);
  }
  return r;
}

Tensor flip(const Tensor& x, const std::vector<int64_t>& axes) {
  Tensor r = x;
  for (int64_t a : axes) {
    int64_t axis = axis_of("flip", a, x.rank());
    const Dim& n = r.shape()[static_cast<size_t>(axis)];
    if (auto k = n.as_const()) {
      if (*k <= 1) continue;
      std::vector<int64_t> rev;
      for (int64_t i = *k - 1; i >= 0; --i) rev.push_back(i);
      r = take_static(r, axis, rev);
    } else {  // n - 1 - i, computed at run time
      Tensor i = iota(r, n);
      r = gather(r, dim_value(r, n) - 1.0 - i, axis);
    }
  }
  return r;
}

Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& axes) {
  const char* op = "roll";
  if (axes.empty()) {  // the flattened tensor, as torch.roll without dims
    if (shifts.size() != 1) fail(op, "one shift is needed without axes");
    Tensor flat = reshape(x, {Dim(-1)});
    return reshape(roll(flat, shifts, {0}), x.shape());
  }
  if (shifts.size() != axes.size()) fail(op, std::to_string(shifts.size()) + " shifts for " + std::to_string(axes.size()) + " axes");
  Tensor r = x;
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t axis = axis_of(op, axes[k], x.rank());
    const Dim& n = r.shape()[static_cast<size_t>(axis)];
    if (auto len = n.as_const()) {
      if (*len == 0) continue;
      int64_t s = ((shifts[k] % *len) + *len) % *len;
      if (s == 0) continue;
      // The last s elements come first.
      r = concat({slice(r, axis, Dim(*len - s), Dim(*len)), slice(r, axis, Dim(0), Dim(*len - s))}, axis);
    } else {  // (i - shift) mod n, at run time
      Tensor nv = dim_value(r, n);
      Tensor src = mod(iota(r, n) - static_cast<double>(shifts[k]), nv);
      r = gather(r, src, axis);
    }
  }
  return r;
}

// Moved last and flattened: x [rows, n], idx [rows, m]; the flat position
// of each index is row * n + idx (negative indices counted from n).
Tensor take_along(const Tensor& x, const Tensor& idx, int64_t axis_) {
  const char* op = "take_along";
  if (idx.rank() != x.rank()) fail(op, "the indices " + idx.type().str() + " need the rank of " + x.type().str());
  if (!is_int(idx.dtype())) fail(op, "the indices must be integers, got " + idx.type().str());
  if (x.rank() == 0) return reshape(gather(reshape(x, {Dim(1)}), reshape(idx, {Dim(1)}), 0), {});
  int64_t axis = axis_of(op, axis_, x.rank());
  // Dims other than the axis: the indices' (x's may be larger: the rest is never read).
  Tensor src = x;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d == axis) continue;
    const Dim &xd = x.shape()[static_cast<size_t>(d)], &id = idx.shape()[static_cast<size_t>(d)];
    if (xd == id) continue;
    auto xc = xd.as_const(), ic = id.as_const();
    if (!xc || !ic) unsupported(op, "indices " + idx.type().str() + " smaller than the data " + x.type().str() + " in a symbolic dim");
    if (*ic > *xc) fail(op, "the indices " + idx.type().str() + " are larger than the data " + x.type().str() + " outside the axis");
    src = slice(src, d, Dim(0), Dim(*ic));
  }
  Moved mx = move_last(src, axis), mi = move_last(idx, axis);
  const Tensor &xs = mx.x, &is = mi.x;
  const Dim n = xs.shape().back(), m = is.shape().back();
  Shape rows_shape(is.shape().begin(), is.shape().end() - 1);
  Dim rows = numel(rows_shape);
  Tensor i64 = cast(reshape(is, {rows, m}), DType::i64);
  Tensor nv = dim_value(x, n);
  i64 = where(lt(i64, x.tracer()->scalar(0, DType::i64)), i64 + nv, i64);
  // An index out of [0, n) must not read another row: it is sent out of
  // the flat range, where the gather reports it.
  Tensor bad = logical_or(lt(i64, x.tracer()->scalar(0, DType::i64)), ge(i64, nv));
  Tensor flat = reshape(iota(x, rows), {rows, Dim(1)}) * nv + i64;
  flat = where(bad, x.tracer()->scalar(-1, DType::i64) - dim_value(x, rows * n), flat);
  Tensor got = gather(reshape(xs, {rows * n}), reshape(flat, {rows * m}), 0);
  return move_back(mi, reshape(got, is.shape()));
}

// The flat positions of take_along; the writes as a scatter_add of the
// updates (add), or of their difference from what is there (overwrite:
// x + scatter_add(0, idx, src - x[idx]) with a mask against double writes
// counted once: each position takes the sum of its writes divided by
// their count, which is any one of them when they agree).
Tensor scatter(const Tensor& x, const Tensor& idx, const Tensor& src, int64_t axis_, bool add) {
  const char* op = "scatter";
  if (idx.rank() != x.rank() || src.rank() != x.rank()) fail(op, "data " + x.type().str() + ", indices " + idx.type().str() + " and updates " + src.type().str() + " need one rank");
  if (!is_int(idx.dtype())) fail(op, "the indices must be integers, got " + idx.type().str());
  if (x.rank() == 0) return add ? x + src : src;
  int64_t axis = axis_of(op, axis_, x.rank());
  // Updates beyond the indices' shape are never read.
  Tensor upd = src.dtype() == x.dtype() ? src : cast(src, x.dtype());
  for (int64_t d = 0; d < x.rank(); ++d) {
    const Dim &ud = upd.shape()[static_cast<size_t>(d)], &id = idx.shape()[static_cast<size_t>(d)];
    if (ud == id) continue;
    auto uc = ud.as_const(), ic = id.as_const();
    if (!uc || !ic || *ic > *uc) fail(op, "updates " + src.type().str() + " smaller than the indices " + idx.type().str());
    upd = slice(upd, d, Dim(0), Dim(*ic));
  }
  std::vector<int64_t> xs, is;
  for (int64_t d = 0; d < x.rank(); ++d) xs.push_back(static_dim(op, x, d)), is.push_back(static_dim(op, idx, d));
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != axis && is[static_cast<size_t>(d)] > xs[static_cast<size_t>(d)]) fail(op, "the indices " + idx.type().str() + " are larger than the data " + x.type().str() + " outside the axis");
  // Flat positions in x: sum over dims of coord * stride, the axis' coord from idx.
  Tensor i64 = cast(idx, DType::i64);
  int64_t n = xs[static_cast<size_t>(axis)];
  Tensor zero = x.tracer()->scalar(0, DType::i64);
  i64 = where(lt(i64, zero), i64 + static_cast<double>(n), i64);
  std::optional<Tensor> flat;
  int64_t stride = 1;
  for (int64_t d = x.rank() - 1; d >= 0; --d) {
    Tensor coord = i64;
    if (d != axis) {
      Shape s(is.size(), Dim(1));
      s[static_cast<size_t>(d)] = Dim(is[static_cast<size_t>(d)]);
      coord = reshape(iota(x, Dim(is[static_cast<size_t>(d)])), s);
    } else {  // out of range: far outside the flat range, reported by the scatter
      coord = where(logical_or(lt(i64, zero), ge(i64, x.tracer()->scalar(static_cast<double>(n), DType::i64))),
                    x.tracer()->scalar(-static_cast<double>(int64_t{1} << 40), DType::i64), i64);
    }
    Tensor term = stride == 1 ? coord : coord * static_cast<double>(stride);
    flat = flat ? *flat + term : term;
    stride *= xs[static_cast<size_t>(d)];
  }
  int64_t total = stride, count = 1;
  for (int64_t v : is) count *= v;
  Tensor at = reshape(expand(*flat, Shape(is.begin(), is.end())), {Dim(count)});
  Tensor u = reshape(upd, {Dim(count)});
  // scatter_add adds floats: other dtypes go through f64 (exact for every
  // integer up to 2^53 and for bool).
  DType dt = x.dtype();
  bool through_f64 = !is_float(dt);
  Tensor base = reshape(x, {Dim(total)});
  if (through_f64) base = cast(base, DType::f64), u = cast(u, DType::f64);
  Tensor r;
  if (add) {
    r = scatter_add(base, at, u, 0);
  } else {
    Tensor zeros = expand(base.tracer()->scalar(0, base.dtype()), {Dim(total)});
    Tensor sums = scatter_add(zeros, at, u, 0);
    Tensor hits = scatter_add(zeros, at, expand(base.tracer()->scalar(1, base.dtype()), {Dim(count)}), 0);
    r = where(gt(hits, base.tracer()->scalar(0, base.dtype())), sums / maximum(hits, base.tracer()->scalar(1, base.dtype())), base);
  }
  if (through_f64) r = cast(r, dt);
  return reshape(r, x.shape());
}

namespace {

Tensor triangle(const Tensor& x, int64_t k, bool upper) {
  if (x.rank() < 2) fail(upper ? "triu" : "tril", "the input needs rank 2 or more, got " + x.type().str());
  const Dim rows = x.shape()[static_cast<size_t>(x.rank() - 2)], cols = x.shape()[static_cast<size_t>(x.rank() - 1)];
  Tensor i = reshape(iota(x, rows), {rows, Dim(1)}), j = reshape(iota(x, cols), {Dim(1), cols});
  Tensor diag = j - i;
  Tensor keep = upper ? diag >= static_cast<double>(k) : diag <= static_cast<double>(k);
  return where(keep, x, x.tracer()->scalar(0, x.dtype()));
}

}  // namespace

Tensor tril(const Tensor& x, int64_t k) { return triangle(x, k, false); }
Tensor triu(const Tensor& x, int64_t k) { return triangle(x, k, true); }

}  // namespace tj
