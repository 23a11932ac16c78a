// fold_conv_pads: a convolution of a zero-padded input reads the input
// itself, the pads added to its own:
//
//   p = concat(Z, x, Z) along spatial axes   (any number of them, each pad
//                                             optional; Z a splat of +0)
//   conv(p, w) {pad_begin, pad_end}  ->  conv(x, w) {pad_begin + before,
//                                                    pad_end + after}
//
// An ONNX Pad before a Conv imports as such concats (TensorFlow's "same"
// padding, asymmetric at stride 2: timm's tf_efficientnet_lite0 pads each
// strided conv's input by one row and column, a copy of the whole image:
// 317 us for its 112x112x96 one). The reference pads a conv with +0 as the
// concats do, and sums the same terms in the same order: the same bits.
// Channels first, after constant_fold (the pads are splats then), before
// assign_layouts. The concats stay where something else reads them.
#include <cmath>
#include <optional>

#include "ir/rewriter.h"
#include "passes/passes.h"

namespace tj {

namespace {

// A splat of +0 (a constant of one value, or a scalar one expanded).
bool positive_zero(const Graph& g, ValueId v) {
  const Node& n = g.node(v);
  if (n.op == Op::expand) return positive_zero(g, n.inputs[0]);
  if (n.op != Op::constant || n.const_data()->size() != 1) return false;
  const double f = (*n.const_data())[0];
  return f == 0 && !std::signbit(f);
}

struct Unpadded {
  ValueId x;
  std::vector<int64_t> before, after;  // per spatial dim
};

// The conv's input without its zero pads, if it has any.
std::optional<Unpadded> unpadded(const Graph& g, const Node& conv) {
  if (conv.op != Op::conv || conv.attr_bool("channels_last") || conv.attr_bool("winograd")) return std::nullopt;
  const size_t rank = static_cast<size_t>(g.type(conv.inputs[0]).rank());
  Unpadded u{conv.inputs[0], std::vector<int64_t>(rank - 2, 0), std::vector<int64_t>(rank - 2, 0)};
  for (;;) {
    const Node& n = g.node(u.x);
    if (n.op != Op::concat || !is_float(n.type.dtype)) break;
    const int64_t axis = n.attr_int("axis");
    if (axis < 2 || axis >= static_cast<int64_t>(rank)) break;
    int data = -1;
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (!positive_zero(g, n.inputs[i])) {
        if (data >= 0) return std::nullopt;  // two operands that are not padding
        data = static_cast<int>(i);
      }
    if (data < 0) break;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (static_cast<int>(i) == data) continue;
      const Dim& e = g.type(n.inputs[i]).shape[static_cast<size_t>(axis)];
      if (!e.is_const()) return std::nullopt;
      (static_cast<int>(i) < data ? u.before : u.after)[static_cast<size_t>(axis - 2)] += e.value();
    }
    u.x = n.inputs[static_cast<size_t>(data)];
  }
  if (u.x == conv.inputs[0]) return std::nullopt;
  return u;
}

}  // namespace

bool fold_conv_pads(Graph& g, const PassOptions&) {
  bool any = false;
  for (const Node& n : g.nodes()) any |= unpadded(g, n).has_value();
  if (!any) return false;
  Rewriter rw(g);
  Graph& out = rw.out();
  g = rw.run([&](ValueId v) -> ValueId {
    const Node& n = g.node(v);
    const std::optional<Unpadded> u = unpadded(g, n);
    if (!u) return Rewriter::kCopy;
    std::vector<int64_t> pb = n.attr_ints("pad_begin"), pe = n.attr_ints("pad_end");
    pb.resize(u->before.size(), 0), pe.resize(u->after.size(), 0);
    for (size_t d = 0; d < u->before.size(); ++d) pb[d] += u->before[d], pe[d] += u->after[d];
    std::vector<ValueId> ins = rw.map_all(n.inputs);
    ins[0] = rw.map(u->x);
    Node folded = n;
    folded.attrs = folded.with_attr("pad_begin", pb);
    return out.add_raw(Op::conv, ins, folded.with_attr("pad_end", pe));
  });
  return true;
}

}  // namespace tj
