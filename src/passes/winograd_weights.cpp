// winograd_weights: a channels-last f32 3x3 convolution with one group,
// stride 1 and dilation 1, constant weights w [M, C, 3, 3] with C a
// multiple of 16, and an output of at least kWinogradPositions positions
// gets winograd=true and a fourth input u: its weights in the Winograd
// F(m x m, 3x3) domain (Lavin and Gray, "Fast Algorithms for Convolutional
// Neural Networks", 2015), m = 4 where the output has at least
// kWinograd4Positions positions and 2 below,
//   U = G w G^T per (output channel, input channel), a = m + 2 points a side,
//   F(2x2): G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]],
//   F(4x4): G = [[1/4, 0, 0], [-1/6, -1/6, -1/6], [-1/6, 1/6, -1/6],
//                [1/24, 1/12, 1/6], [1/24, -1/12, 1/6], [0, 0, 1]],
// stored [ceil(M/64), a*a, C, 64]: per block of 64 output channels, the
// points xi = a*i + j of the a x a domain, the input channels, then the 64
// output channels side by side (zeros past M), the order the kernel's
// GEMM per point reads them in (the kernel reads m off u's shape). A conv
// without bias gets a zero one.
// The conv's value is unchanged (the reference computes it from w), so the
// pass is exact in the IR's semantics. The CPU kernel computes it as m x m
// output tiles, Y = A^T [U . (B^T d B)] A, with a*a products per tile and
// channel pair where the direct form has 9 m*m: 2.25x (F(2x2)) or 4x
// (F(4x4)) fewer multiply-adds, and other roundings (docs/codegen.md).
//
// A winograd conv already in the graph has its u derived again, or goes
// back to the direct form where its weights are not constants: the kernel
// reads no u this pass did not make from the conv's own weights.
//
// Runs after freezing and after every pass that changes conv weights
// (fold_conv_affine leaves winograd convs alone), before pack_conv_weights.
#include <map>

#include "ir/rewriter.h"
#include "passes/passes.h"

namespace tj {

namespace {

// Output positions the Winograd form needs at least. A 7x7 output still
// gains though its tiles cover 8x8 and u is 16/9 the weights' bytes
// (resnet18's 7x7 512-channel convs: 1215-1298 -> 891-952 us); below it
// a part has too few tiles for the GEMM's register tile.
constexpr int64_t kWinogradPositions = 49;
// Output positions F(4x4) needs at least: its u is 4x the weights' bytes
// (F(2x2)'s 16/9), read once per part, and a 4x4 tile past the output's
// edge computes more positions for nothing. resnet18 with F(4x4) from
// 14x14 on was 1.3% slower than from 28x28 on (alternating in one process).
constexpr int64_t kWinograd4Positions = 28 * 28;

bool applies(const Graph& g, const Node& n) {
  if (n.op != Op::conv || n.type.dtype != DType::f32 || n.type.rank() != 4 || !n.attr_bool("channels_last")) return false;
  if (n.attr_int("groups") != 1 || n.attr_ints("stride") != std::vector<int64_t>{1, 1} || n.attr_ints("dilation") != std::vector<int64_t>{1, 1}) return false;
  const Node& w = g.node(n.inputs[1]);
  if (w.op != Op::constant || w.type.rank() != 4 || w.const_data()->size() <= 1) return false;
  const Shape& ws = w.type.shape;
  if (ws[2] != Dim(3) || ws[3] != Dim(3) || ws[1].value() % 16 != 0) return false;
  return n.type.shape[1].value() * n.type.shape[2].value() >= kWinogradPositions;
}

// F(m x m, 3x3)'s G, m = 2 or 4: a = m + 2 rows.
constexpr double kG2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
constexpr double kG4[6][3] = {{1.0 / 4, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                              {1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};

// The output tile's side for conv n: 4 where the output is large enough.
int64_t tile_side(const Node& n) { return n.type.shape[1].value() * n.type.shape[2].value() >= kWinograd4Positions ? 4 : 2; }

// u of w [M, C, 3, 3] for F(m x m, 3x3), in double, rounded once.
NDArray winograd_domain(const Node& w, int64_t m) {
  const int a = static_cast<int>(m) + 2, points = a * a;
  const double(*G)[3] = m == 4 ? kG4 : kG2;
  const int64_t M = w.type.shape[0].value(), C = w.type.shape[1].value(), blocks = (M + 63) / 64;
  NDArray u(DType::f32, {blocks, points, C, 64});
  float* dst = u.data<float>();  // zeros past M
  const float* src = static_cast<const float*>(w.const_data()->raw());
  for (int64_t o = 0; o < M; ++o)
    for (int64_t c = 0; c < C; ++c) {
      const float* k = src + (o * C + c) * 9;
      double gk[6][3];  // G w
      for (int i = 0; i < a; ++i)
        for (int j = 0; j < 3; ++j) gk[i][j] = G[i][0] * k[j] + G[i][1] * k[3 + j] + G[i][2] * k[6 + j];
      for (int i = 0; i < a; ++i)
        for (int j = 0; j < a; ++j)
          dst[(((o / 64) * points + a * i + j) * C + c) * 64 + o % 64] = static_cast<float>(gk[i][0] * G[j][0] + gk[i][1] * G[j][1] + gk[i][2] * G[j][2]);
    }
  return u;
}

}  // namespace

bool winograd_weights(Graph& g, const PassOptions&) {
  bool any = false;
  for (const Node& n : g.nodes()) any |= applies(g, n) || (n.op == Op::conv && n.attr_bool("winograd"));
  if (!any) return false;
  Rewriter rw(g);
  Graph& out = rw.out();
  std::map<std::pair<ValueId, int64_t>, ValueId> domain;  // per weight constant and tile side, its u (one weight, several convs)
  g = rw.run([&](ValueId v) -> ValueId {
    const Node& n = g.node(v);
    // A winograd conv that came in (IR text) has its u derived again from
    // its weights, or, where they are not constants, goes back to the
    // direct form: the kernel never reads a u this pass did not make.
    const bool was = n.op == Op::conv && n.attr_bool("winograd");
    if (!applies(g, n)) {
      if (!was) return Rewriter::kCopy;
      return out.add_raw(Op::conv, rw.map_all({n.inputs[0], n.inputs[1], n.inputs[2]}), n.with_attr("winograd", false));
    }
    const Node& w = g.node(n.inputs[1]);
    const int64_t m = tile_side(n);
    auto [at, fresh] = domain.try_emplace({n.inputs[1], m}, -1);
    if (fresh) {
      NDArray a = winograd_domain(w, m);
      const Type t{DType::f32, {Dim(a.shape()[0]), Dim(a.shape()[1]), w.type.shape[1], Dim(64)}};
      at->second = out.add_const(t, ConstValues::adopt(std::move(a)));
    }
    const ValueId u = at->second;
    std::vector<ValueId> ins = rw.map_all(n.inputs);
    if (was) ins.pop_back();
    if (ins.size() == 2) ins.push_back(out.add_const({DType::f32, {w.type.shape[0]}}, std::vector<double>(static_cast<size_t>(w.type.shape[0].value()), 0.0)));
    ins.push_back(u);
    return out.add_raw(Op::conv, ins, n.with_attr("winograd", true));
  });
  return true;
}

}  // namespace tj
