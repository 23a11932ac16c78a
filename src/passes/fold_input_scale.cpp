// fold_input_scale: a per-channel scale of a convolution's input, computed
// per call (squeeze-excitation's gate), moves onto the convolution's packed
// weights:
//   conv(mul(x, s), view(Wq))  ->  conv(x, view(mul(Wq, reshape(s, [1, 1.., C, 1]))))
// where the conv is channels last with one group, its weights packed by
// pack_conv_weights (Wq [ceil(M/64), k.., C, 64], the view its
// slice?(reshape(permute(Wq)))), not in the Winograd domain, x [1, d.., C]
// (one image: a scale per image would need weights per image) and s
// [1, 1.., C]. The scaled copy of the weights is computed per call instead
// of the scaled input, so only where it is several times smaller than x
// (kSmaller) and the scaled input has no other user: efficientnet_b0's
// 56x56x144 gate then scales 9,216 weights instead of 451,584 inputs, and
// the pass leaves its 7x7x1152 ones (221,184 weights against 56,448
// inputs) alone.
// Reassociates (x * s) * w as x * (s * w): about 1 ulp. Runs after
// pack_conv_weights (the view it rewrites) and before fusion.
#include <vector>

#include "ir/layout.h"
#include "ir/rewriter.h"
#include "passes/passes.h"

namespace tj {

namespace {

// How much smaller than the input the packed weights must be: the scaled
// copy is a kernel of its own, reading the weights and writing them again.
// efficientnet_b0's gates at 112x112 to 28x28 (weights 16 to 49 times
// smaller) gained 2.7-2.9% of the model; mobilenet_v3_small's at 14x14
// (3 times) nothing (0.995-1.002, alternating with and without).
constexpr int64_t kSmaller = 4;

// The scale s of conv n's input mul(x, s) (either side), or -1 where the
// pass does not apply.
ValueId input_scale(const Graph& g, const Node& n, const std::vector<std::vector<ValueId>>& users, const std::vector<bool>& live) {
  if (n.op != Op::conv || n.type.dtype != DType::f32 || !n.attr_bool("channels_last") || n.attr_int("groups") != 1 || n.attr_bool("winograd"))
    return -1;
  const ValueId in = n.inputs[0], wq = packed_conv_quads(g, n.inputs[1], 64);
  const Node& m = g.node(in);
  if (wq < 0 || m.op != Op::mul || g.node(wq).op == Op::mul) return -1;
  const Shape& xs = g.type(in).shape;
  if (xs.empty() || xs[0] != Dim(1)) return -1;
  ValueId s = -1;
  for (int i = 0; i < 2 && s < 0; ++i) {
    const Type& a = g.type(m.inputs[static_cast<size_t>(i)]);
    const Type& b = g.type(m.inputs[static_cast<size_t>(1 - i)]);
    bool per_channel = a.dtype == DType::f32 && a.shape == xs && b.dtype == DType::f32 && b.rank() == a.rank() && b.shape.back() == xs.back();
    for (size_t d = 0; per_channel && d + 1 < b.shape.size(); ++d) per_channel = b.shape[d] == Dim(1);
    if (per_channel) s = m.inputs[static_cast<size_t>(1 - i)];
  }
  if (s < 0) return -1;
  for (ValueId u : users[static_cast<size_t>(in)])
    if (u < 0 || (live[static_cast<size_t>(u)] && &g.node(u) != &n)) return -1;  // an output, or another live reader
  const int64_t weights = numel(g.type(wq).shape).value(), inputs = numel(xs).value();
  return kSmaller * weights <= inputs ? s : -1;
}

}  // namespace

bool fold_input_scale(Graph& g, const PassOptions&) {
  const auto users = users_of(g);
  const auto live = live_values(g);
  std::vector<ValueId> scale(g.size(), -1);
  bool any = false;
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op == Op::conv && live[i]) any |= (scale[i] = input_scale(g, n, users, live)) >= 0;
  }
  if (!any) return false;
  Rewriter rw(g);
  Graph& out = rw.out();
  g = rw.run([&](ValueId v) -> ValueId {
    const ValueId s = scale[static_cast<size_t>(v)];
    if (s < 0) return Rewriter::kCopy;
    const Node& n = g.node(v);
    // The view's nodes from the conv's weights down to Wq, applied again to the scaled copy.
    const ValueId wq = packed_conv_quads(g, n.inputs[1], 64);
    std::vector<const Node*> view;
    for (ValueId u = n.inputs[1]; u != wq; u = g.node(u).inputs[0]) view.push_back(&g.node(u));
    const Shape& ws = g.type(wq).shape;
    Shape bs(ws.size(), Dim(1));
    bs[ws.size() - 2] = ws[ws.size() - 2];  // C
    ValueId w = out.add(Op::mul, {rw.map(wq), out.add(Op::reshape, {rw.map(s)}, {{"shape", bs}})});
    for (auto it = view.rbegin(); it != view.rend(); ++it) w = out.add_raw((*it)->op, {w}, (*it)->attrs);
    const Node& m = g.node(n.inputs[0]);
    const ValueId x = m.inputs[0] == s ? m.inputs[1] : m.inputs[0];
    std::vector<ValueId> ins = rw.map_all(n.inputs);
    ins[0] = rw.map(x), ins[1] = w;
    return out.add_raw(Op::conv, ins, n.attrs);
  });
  return true;
}

}  // namespace tj
