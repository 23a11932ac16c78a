// trim_conv_taps: a convolution's kernel offsets that read only padding,
// for every output position, are dropped: along each spatial dim the taps
// some output's window reaches inside the input are an interval [t0, t1)
// (a larger offset reads further along), and the conv becomes one with
// kernel t1 - t0, the weights sliced to it and the pads reduced by the
// dropped taps' span, so every output keeps its window's live taps:
//   conv(x, w) {k=3, dilation=24, pad=24} over 14 positions
//     -> conv(x, w[.., 1:2]) {k=1, dilation=1, pad=0}
// DeepLabV3's atrous pyramid at 224x224 (dilations 24 and 36 over a 14x14
// map) spent 9 multiply-adds per output where 1 reads the image.
//
// Bit-exact: the reference sums from +0, in order, the dropped terms being
// a weight times a padding +0, that is ±0 for a finite weight; adding ±0
// to a sum leaves it as it is (a sum that starts at +0 is never -0, and
// +0 + -0 is +0), and the kept terms stay in their order. So a dropped tap's
// weights must be finite (inf times 0 is NaN): constant weights only, with
// freezing. Channels first, before assign_layouts; a conv whose new pads
// would be negative, or with no live tap along a dim, is left alone.
#include <cmath>
#include <optional>

#include "ir/ops/windows.h"
#include "ir/rewriter.h"
#include "passes/passes.h"

namespace tj {

namespace {

struct Trim {
  std::vector<int64_t> t0, t1;  // per spatial dim: the live taps
};

std::vector<int64_t> ints_or(const Node& n, const char* name, size_t k, int64_t fill) {
  std::vector<int64_t> v = n.attr_ints(name);
  if (v.empty()) v.assign(k, fill);
  return v;
}

// The flat offsets (row-major over the kernel k) of the taps t keeps, in
// order.
std::vector<int64_t> kept_taps(const std::vector<int64_t>& k, const Trim& t) {
  std::vector<int64_t> kept{0};
  for (size_t d = 0; d < k.size(); ++d) {
    std::vector<int64_t> next;
    for (int64_t at : kept)
      for (int64_t i = t.t0[d]; i < t.t1[d]; ++i) next.push_back(at * k[d] + i);
    kept = std::move(next);
  }
  return kept;
}

int64_t product(const std::vector<int64_t>& k) {
  int64_t n = 1;
  for (int64_t e : k) n *= e;
  return n;
}

// The finite test on the weights [outer, k..] the trim drops, for the float
// dtypes the constant's values can be read in.
template <class T>
bool dropped_finite(const T* w, const std::vector<int64_t>& k, int64_t outer, const Trim& t) {
  const int64_t taps = product(k);
  std::vector<bool> kept(static_cast<size_t>(taps), false);
  for (int64_t i : kept_taps(k, t)) kept[static_cast<size_t>(i)] = true;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < taps; ++i)
      if (!kept[static_cast<size_t>(i)] && !std::isfinite(static_cast<double>(w[o * taps + i]))) return false;
  return true;
}

std::optional<Trim> trim_of(const Graph& g, const Node& n) {
  if (n.op != Op::conv || n.attr_bool("channels_last") || n.attr_bool("winograd") || n.inputs.size() > 3) return std::nullopt;
  const Node& w = g.node(n.inputs[1]);
  if (w.op != Op::constant || (w.type.dtype != DType::f32 && w.type.dtype != DType::f64)) return std::nullopt;
  const Shape& xs = g.type(n.inputs[0]).shape;
  const Shape& ws = w.type.shape;
  const size_t k = ws.size() - 2;
  const auto stride = ints_or(n, "stride", k, 1), dil = ints_or(n, "dilation", k, 1);
  const auto pb = ints_or(n, "pad_begin", k, 0), pe = ints_or(n, "pad_end", k, 0);
  Trim t;
  bool any = false;
  std::vector<int64_t> kernel;
  for (size_t d = 0; d < k; ++d) {
    const int64_t H = xs[d + 2].value(), K = ws[d + 2].value(), O = n.type.shape[d + 2].value();
    kernel.push_back(K);
    const auto [t0, t1] = windows::live_taps(0, O, stride[d], pb[d], dil[d], K, H);
    if (t1 <= t0) return std::nullopt;  // every window of this dim in the padding: the output is the bias
    if (pb[d] - t0 * dil[d] < 0 || pe[d] - (K - t1) * dil[d] < 0) return std::nullopt;
    any |= t0 > 0 || t1 < K;
    t.t0.push_back(t0);
    t.t1.push_back(t1);
  }
  if (!any) return std::nullopt;
  const int64_t outer = ws[0].value() * ws[1].value(), all = outer * product(kernel);
  if (w.const_data()->dtype() != w.type.dtype || static_cast<int64_t>(w.const_data()->size()) != all) return std::nullopt;  // a splat: left alone
  const bool finite = w.type.dtype == DType::f32 ? dropped_finite(static_cast<const float*>(w.const_data()->raw()), kernel, outer, t)
                                                 : dropped_finite(static_cast<const double*>(w.const_data()->raw()), kernel, outer, t);
  if (!finite) return std::nullopt;
  return t;
}

// w [M, Cg, k..] sliced to the live taps.
template <class T>
NDArray sliced(const T* w, const Shape& ws, const Trim& t, DType dt) {
  std::vector<int64_t> k, shape = {ws[0].value(), ws[1].value()};
  for (size_t d = 2; d < ws.size(); ++d) {
    k.push_back(ws[d].value());
    shape.push_back(t.t1[d - 2] - t.t0[d - 2]);
  }
  const std::vector<int64_t> kept = kept_taps(k, t);
  const int64_t taps = product(k), n = static_cast<int64_t>(kept.size());
  NDArray out(dt, shape);
  T* dst = out.data<T>();
  for (int64_t o = 0; o < shape[0] * shape[1]; ++o)
    for (int64_t j = 0; j < n; ++j) dst[o * n + j] = w[o * taps + kept[static_cast<size_t>(j)]];
  return out;
}

}  // namespace

bool trim_conv_taps(Graph& g, const PassOptions&) {
  std::vector<std::optional<Trim>> trims(g.size());
  bool any = false;
  for (ValueId v = 0; v < static_cast<ValueId>(g.size()); ++v) {
    trims[static_cast<size_t>(v)] = trim_of(g, g.node(v));
    any |= trims[static_cast<size_t>(v)].has_value();
  }
  if (!any) return false;
  Rewriter rw(g);
  Graph& out = rw.out();
  g = rw.run([&](ValueId v) -> ValueId {
    const std::optional<Trim>& t = trims[static_cast<size_t>(v)];
    if (!t) return Rewriter::kCopy;
    const Node& n = g.node(v);
    const Node& w = g.node(n.inputs[1]);
    const size_t k = w.type.shape.size() - 2;
    NDArray nw = w.type.dtype == DType::f32 ? sliced(static_cast<const float*>(w.const_data()->raw()), w.type.shape, *t, DType::f32)
                                            : sliced(static_cast<const double*>(w.const_data()->raw()), w.type.shape, *t, DType::f64);
    Shape nws;
    for (int64_t e : nw.shape()) nws.push_back(Dim(e));
    std::vector<ValueId> ins = rw.map_all(n.inputs);
    ins[1] = out.add_const({w.type.dtype, nws}, ConstValues::adopt(std::move(nw)));
    auto dil = ints_or(n, "dilation", k, 1), pb = ints_or(n, "pad_begin", k, 0), pe = ints_or(n, "pad_end", k, 0);
    for (size_t d = 0; d < k; ++d) {
      const int64_t K = w.type.shape[d + 2].value();
      pb[d] -= t->t0[d] * dil[d];
      pe[d] -= (K - t->t1[d]) * dil[d];
      if (t->t1[d] - t->t0[d] == 1) dil[d] = 1;  // one tap: its dilation means nothing
    }
    Node trimmed = n;
    trimmed.attrs = trimmed.with_attr("dilation", dil);
    trimmed.attrs = trimmed.with_attr("pad_begin", pb);
    return out.add_raw(Op::conv, ins, trimmed.with_attr("pad_end", pe));
  });
  return true;
}

}  // namespace tj
