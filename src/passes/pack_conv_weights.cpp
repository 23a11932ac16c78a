// pack_conv_weights: a convolution's constant f32 weights w [M, C, k..]
// (one group) are stored as Wp [ceil(M/16), C, k.., 16], 16 output channels
// side by side (zeros past M), and read back through views:
//   w = slice(reshape(permute(Wp, [0, k+2, 1, .., k+1]), [16 ceil(M/16), C, k..]), 0, 0, M)
// The same values, so bit-exact; the C++ conv kernel recognizes the views
// and reads Wp directly, a vector of 16 output channels per (input
// channel, kernel offset) (docs/codegen.md). Runs after freezing, on
// constants only; a weight already packed is left alone.
#include "ir/rewriter.h"
#include "passes/passes.h"

namespace tj {

namespace {

constexpr int64_t kBlock = 16;

bool packable(const Graph& g, const Node& n) {
  if (n.op != Op::conv || n.type.dtype != DType::f32 || n.attr_int("groups") != 1) return false;
  const Node& w = g.node(n.inputs[1]);
  return w.op == Op::constant && w.const_data()->size() > 1 && w.type.rank() >= 3 && w.type.rank() <= 4;
}

}  // namespace

bool pack_conv_weights(Graph& g, const PassOptions&) {
  bool any = false;
  for (const Node& n : g.nodes()) any |= packable(g, n);
  if (!any) return false;
  Rewriter rw(g);
  Graph& out = rw.out();
  std::vector<ValueId> packed(g.size(), -1);  // per weight constant: its view of the packed copy
  g = rw.run([&](ValueId v) -> ValueId {
    const Node& n = g.node(v);
    if (!packable(g, n)) return Rewriter::kCopy;
    const ValueId wv = n.inputs[1];
    ValueId& view = packed[static_cast<size_t>(wv)];
    if (view < 0) {
      const Node& w = g.node(wv);
      const Shape& ws = w.type.shape;
      const int64_t M = ws[0].value(), blocks = (M + kBlock - 1) / kBlock;
      int64_t inner = 1;  // C * taps
      for (size_t i = 1; i < ws.size(); ++i) inner *= ws[i].value();
      NDArray p(DType::f32, [&] {
        std::vector<int64_t> s{blocks};
        for (size_t i = 1; i < ws.size(); ++i) s.push_back(ws[i].value());
        s.push_back(kBlock);
        return s;
      }());
      const float* src = static_cast<const float*>(w.const_data()->raw());
      float* dst = p.data<float>();
      for (int64_t m = 0; m < M; ++m)
        for (int64_t i = 0; i < inner; ++i) dst[((m / kBlock) * inner + i) * kBlock + m % kBlock] = src[m * inner + i];
      Shape ps;
      for (int64_t d : p.shape()) ps.push_back(Dim(d));
      const ValueId c = out.add_const({DType::f32, ps}, ConstValues::adopt(std::move(p)));
      const int64_t r = static_cast<int64_t>(ps.size());
      std::vector<int64_t> perm{0, r - 1};
      for (int64_t i = 1; i + 1 < r; ++i) perm.push_back(i);
      Shape full = ws;
      full[0] = Dim(blocks * kBlock);
      view = out.add(Op::reshape, {out.add(Op::permute, {c}, {{"perm", perm}})}, {{"shape", full}});
      if (blocks * kBlock != M) view = out.add(Op::slice, {view}, {{"axis", int64_t{0}}, {"start", Dim(0)}, {"end", Dim(M)}});
    }
    std::vector<ValueId> ins = rw.map_all(n.inputs);
    ins[1] = view;
    return out.add_raw(Op::conv, ins, n.attrs);
  });
  return true;
}

}  // namespace tj
