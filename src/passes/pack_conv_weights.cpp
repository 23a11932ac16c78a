// pack_conv_weights: a convolution's constant f32 weights w [M, C, k..]
// (one group) are stored as Wp [ceil(M/16), C, k.., 16], 16 output channels
// side by side (zeros past M), and read back through views:
//   w = slice(reshape(permute(Wp, [0, k+2, 1, .., k+1]), [16 ceil(M/16), C, k..]), 0, 0, M)
// The same values, so bit-exact; the C++ conv kernel recognizes the views
// and reads Wp directly, a vector of 16 output channels per (input
// channel, kernel offset) (docs/codegen.md). Channels last, one group, they
// are Wq [ceil(M/64), k.., C, 64]: per block of 64 output channels, the
// taps, then the input channels, then the 64 channels side by side, the
// order the channels-last tile reads them in (one stream, where
// [M/16, C, k.., 16] read four, 576 bytes apart at 3x3):
//   w = slice(reshape(permute(Wq, [0, k+2, k+1, 1, .., k]), [64 ceil(M/64), C, k..]), 0, 0, M)
// A channels-last depthwise
// convolution's weights [C, 1, k..] are stored taps first, Wt [taps, C], a
// vector of channels per kernel offset:
//   w = reshape(permute(Wt, [1, 0]), [C, 1, k..])
// and a channels-last grouped one's [M, Cg, k..] (grouped_channels_last)
// taps first, then each output's Cg inputs, Wt [taps, Cg, M]:
//   w = reshape(permute(Wt, [2, 1, 0]), [M, Cg, k..])
// A channels-last grouped conv with 16 or more outputs per group
// (conv_quad_lanes) takes Wq too, in blocks of min(outputs per group, 64):
// [M/lanes, k.., C/groups, lanes], each block inside one group.
// Runs after freezing, on constants only; a weight already packed is left
// alone.
#include "ir/layout.h"
#include "ir/rewriter.h"
#include "passes/passes.h"

namespace tj {

namespace {

constexpr int64_t kBlock = 16;

enum class Packing { none, blocks, quads, taps_first };

Packing packable(const Graph& g, const Node& n) {
  if (n.op != Op::conv || n.type.dtype != DType::f32) return Packing::none;
  const Node& w = g.node(n.inputs[1]);
  if (w.op != Op::constant || w.const_data()->size() <= 1 || w.type.rank() < 3 || w.type.rank() > 4) return Packing::none;
  if (n.attr_int("groups") == 1) return n.attr_bool("channels_last") ? Packing::quads : Packing::blocks;
  if (n.attr_bool("channels_last") && conv_quad_lanes(w.type.shape, n.attr_int("groups")) > 0) return Packing::quads;
  return n.attr_bool("channels_last") && taps_first_conv(w.type.shape, n.attr_int("groups")) ? Packing::taps_first : Packing::none;
}

// w [M, C, k..] stored with its output channels in blocks of `lanes` side
// by side (zeros past M) and its other dims in `order`: a constant
// [ceil(M/lanes), w's dims in order.., lanes]. Returns its view as w:
// slice(reshape(permute(., packed_view_perm(order)), [lanes ceil(M/lanes), C, k..]), 0, 0, M).
ValueId pack_lanes(Graph& out, const Node& w, int64_t lanes, const std::vector<int64_t>& order) {
  const Shape& ws = w.type.shape;
  const int64_t r = w.type.rank(), M = ws[0].value(), blocks = (M + lanes - 1) / lanes;
  std::vector<int64_t> ps{blocks}, stride(static_cast<size_t>(r), 0);  // stride: where w's dim d steps in the constant
  for (int64_t d : order) ps.push_back(ws[static_cast<size_t>(d)].value());
  ps.push_back(lanes);
  int64_t inner = 1;  // C * taps
  for (auto d = order.rbegin(); d != order.rend(); ++d) stride[static_cast<size_t>(*d)] = inner * lanes, inner *= ws[static_cast<size_t>(*d)].value();
  NDArray p(DType::f32, ps);
  const float* src = static_cast<const float*>(w.const_data()->raw());
  float* dst = p.data<float>();
  for (int64_t m = 0; m < M; ++m) {
    // w's dims 1..r-1 in row-major order, an odometer over them giving the offset in the constant
    std::vector<int64_t> at(static_cast<size_t>(r), 0);
    int64_t off = (m / lanes) * inner * lanes + m % lanes;
    for (int64_t i = 0; i < inner; ++i) {
      dst[off] = src[m * inner + i];
      for (int64_t d = r - 1; d >= 1; --d) {
        const size_t u = static_cast<size_t>(d);
        off += stride[u];
        if (++at[u] < ws[u].value()) break;
        off -= stride[u] * at[u], at[u] = 0;
      }
    }
  }
  Shape pshape;
  for (int64_t d : ps) pshape.push_back(Dim(d));
  const ValueId c = out.add_const({DType::f32, pshape}, ConstValues::adopt(std::move(p)));
  Shape full = ws;
  full[0] = Dim(blocks * lanes);
  ValueId view = out.add(Op::reshape, {out.add(Op::permute, {c}, {{"perm", packed_view_perm(order)}})}, {{"shape", full}});
  if (blocks * lanes != M) view = out.add(Op::slice, {view}, {{"axis", int64_t{0}}, {"start", Dim(0)}, {"end", Dim(M)}});
  return view;
}

}  // namespace

bool pack_conv_weights(Graph& g, const PassOptions&) {
  bool any = false;
  for (const Node& n : g.nodes()) any |= packable(g, n) != Packing::none;
  if (!any) return false;
  Rewriter rw(g);
  Graph& out = rw.out();
  // Per weight constant: its view of the packed copy, per packing.
  std::vector<ValueId> packed(g.size(), -1), quads(g.size(), -1), taps_first(g.size(), -1);
  g = rw.run([&](ValueId v) -> ValueId {
    const Node& n = g.node(v);
    const Packing how = packable(g, n);
    if (how == Packing::none) return Rewriter::kCopy;
    const ValueId wv = n.inputs[1];
    ValueId& view = (how == Packing::blocks ? packed : how == Packing::quads ? quads : taps_first)[static_cast<size_t>(wv)];
    if (view < 0 && how == Packing::taps_first) {
      // [taps, C] depthwise; grouped, [taps, Cg, M]: w[m][j][t] at (t*Cg + j)*M + m.
      const Node& w = g.node(wv);
      const Shape& ws = w.type.shape;
      const int64_t M = ws[0].value(), Cg = ws[1].value();
      int64_t taps = 1;
      for (size_t i = 2; i < ws.size(); ++i) taps *= ws[i].value();
      NDArray p(DType::f32, Cg == 1 ? std::vector<int64_t>{taps, M} : std::vector<int64_t>{taps, Cg, M});
      const float* src = static_cast<const float*>(w.const_data()->raw());
      float* dst = p.data<float>();
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < Cg; ++j)
          for (int64_t t = 0; t < taps; ++t) dst[(t * Cg + j) * M + m] = src[(m * Cg + j) * taps + t];
      Shape ps{Dim(taps), Dim(M)};
      std::vector<int64_t> perm{1, 0};
      if (Cg > 1) ps = {Dim(taps), Dim(Cg), Dim(M)}, perm = {2, 1, 0};
      const ValueId c = out.add_const({DType::f32, ps}, ConstValues::adopt(std::move(p)));
      view = out.add(Op::reshape, {out.add(Op::permute, {c}, {{"perm", perm}})}, {{"shape", ws}});
    }
    if (view < 0 && how == Packing::quads)
      view = pack_lanes(out, g.node(wv), conv_quad_lanes(g.node(wv).type.shape, n.attr_int("groups")), quads_order(g.node(wv).type.rank()));
    if (view < 0) view = pack_lanes(out, g.node(wv), kBlock, blocks_order(g.node(wv).type.rank()));
    std::vector<ValueId> ins = rw.map_all(n.inputs);
    ins[1] = view;
    return out.add_raw(Op::conv, ins, n.attrs);
  });
  return true;
}

}  // namespace tj
