// The C++ emitter's channels-last convolution kernels (conv's channels_last
// form, chosen by passes/assign_layouts.cpp; KernelKind::conv), beside the
// channels-first ones of conv.cpp.
#include <algorithm>
#include <cmath>
#include <optional>

#include "codegen/c_text.h"
#include "codegen/cpp/emitter.h"
#include "codegen/cpp/kernels/conv_common.h"
#include "ir/layout.h"
#include "ir/rewriter.h"
#include "tensorjit/error.h"

namespace tj::cpp {

using namespace conv_kernels;

namespace {

// A register epilogue (tj_conv_tile_cl's EP): the conv's bias and at most
// one activation of its value, ReLU or a clip by constants in tj_clip's
// fast form, where the conv's value is not itself written: the tile adds
// and clamps its sums in registers and stores them once, into `out`.
struct RegisterEpilogue {
  int bits = 0;  // 1 bias, 2 ReLU, 4 clip; 0: none
  float lo = 0, hi = 0;  // the clip's bounds; lo +0 for ReLU
  ValueId out = -1;
};

RegisterEpilogue register_epilogue(const Graph& g, const Kernel& K, ValueId cv, bool bias) {
  RegisterEpilogue r;
  const bool sums_out = std::find(K.outputs.begin(), K.outputs.end(), cv) != K.outputs.end();
  if (K.ops.size() == 1) {
    if (bias) r.bits = 1, r.out = cv;
    return r;
  }
  if (K.ops.size() != 2 || sums_out) return r;
  const Node& a = g.node(K.ops[1]);
  if (a.type.dtype != DType::f32 || a.inputs.empty() || a.inputs[0] != cv || a.type.shape != g.type(cv).shape) return r;
  if (a.op == Op::relu) {
    r.bits = 2;
  } else if (a.op == Op::clip) {
    const auto lo = splat_value(g, a.inputs[1]), hi = splat_value(g, a.inputs[2]);
    if (!lo || !hi) return r;
    r.lo = static_cast<float>(*lo), r.hi = static_cast<float>(*hi);
    // tj_clip's fast form: neither bound NaN, lo not -0, hi not +0; nor
    // hi -0 (tj_conv_act broadcasts a bound by adding it to +0)
    if (std::isnan(r.lo) || std::isnan(r.hi) || (r.lo == 0 && std::signbit(r.lo)) || r.hi == 0) return r;
    r.bits = 4;
  } else {
    return r;
  }
  r.bits |= bias ? 1 : 0;
  r.out = K.ops[1];
  return r;
}

}  // namespace

// The register tiles and depthwise rows the channels-last form calls
// (direct_conv_helpers appends them to the prelude).
std::string Emitter::channels_last_conv_helpers() {
  return ""
         // Channels last: NP output positions (xs floats apart in x) by NV
         // vectors of 16 output channels, weights [KH, KW, C, WS] with the
         // taps wt floats apart (pack_conv_weights' Wq: a block of input
         // channels starts inside), stored as whole vectors at y + p*ym
         // (the lanes below `valid` of the tile's channels). ACC: the sums
         // start from y (a block of input channels after the first). Never
         // inlined: inlined beside an epilogue, its hoisted constants (exp's
         // coefficients) took registers the accumulators needed, and six
         // of them spilled in the inner loop (170 -> 230 us).
         // EP: an epilogue in registers before the store (tj_conv_act):
         // bit 1 adds bias[channel], then bit 2 ReLU (lo +0) or bit 4 a clip
         // to [lo, hi], in the fast forms of tj_max and tj_clip (constant bounds).
         "template <int EP, class V> static inline V tj_conv_act(V x, float lo, float hi) {\n"
         "  if constexpr ((EP & 6) == 0) return x;\n"
         "  const V l = V{} + lo;  // ReLU: lo is +0\n"
         "  V r = x > l ? x : l;\n"
         "  if constexpr ((EP & 4) != 0) {\n    const V h = V{} + hi;\n    r = r < h ? r : h;\n  }\n"
         "  return x != x ? x : r;\n}\n"
         "template <int NP, int NV, int KH, int KW, bool ACC = false, int WS = 64, int EP = 0>\n"
         "__attribute__((noinline)) static void tj_conv_tile_cl(const float* x, int64_t xs, int64_t xr, int64_t xk, const float* w, int64_t wt, int64_t C, float* y,\n"
         "                                   int64_t ym, int64_t valid, const float* bias = nullptr, float lo = 0, float hi = 0) {\n"
         "  tj_vf16 acc[NP][NV];\n"
         "  for (int p = 0; p < NP; ++p)\n    for (int v = 0; v < NV; ++v) {\n"
         "      acc[p][v] = tj_vf16{};\n"
         "      if constexpr (ACC) {\n"
         "        const float* yp = y + p*ym + 16*v;\n"
         "        if (16*(v + 1) <= valid) acc[p][v] = *(const tj_vf16u*)yp;\n"
         "        else for (int64_t l = 0; l < valid - 16*v; ++l) acc[p][v][l] = yp[l];\n      }\n    }\n"
         "  for (int kh = 0; kh < KH; ++kh)\n    for (int kw = 0; kw < KW; ++kw) {\n"
         "      const float* xk_ = x + kh*xr + kw*xk;\n      const float* wk = w + (kh*KW + kw)*wt;\n"
         "      for (int64_t c = 0; c < C; ++c) {\n"
         "        tj_vf16 wv[NV];\n"
         "        for (int v = 0; v < NV; ++v) wv[v] = *(const tj_vf16u*)(wk + c*WS + v*16);\n"
         "#pragma GCC unroll 24\n"
         "        for (int p = 0; p < NP; ++p) {\n"
         "          const float xv = xk_[p*xs + c];\n"
         "          for (int v = 0; v < NV; ++v) acc[p][v] += xv*wv[v];\n"
         "        }\n      }\n    }\n"
         "  for (int p = 0; p < NP; ++p)\n    for (int v = 0; v < NV; ++v) {\n"
         "      float* yp = y + p*ym + 16*v;\n"
         "      if (16*(v + 1) <= valid) {\n"
         "        tj_vf16 s = acc[p][v];\n"
         "        if constexpr ((EP & 1) != 0) s = s + *(const tj_vf16u*)(bias + 16*v);\n"
         "        *(tj_vf16u*)yp = tj_conv_act<EP>(s, lo, hi);\n"
         "      } else {\n"
         "        for (int64_t l = 0; l < valid - 16*v; ++l) {\n"
         "          float s = acc[p][v][l];\n"
         "          if constexpr ((EP & 1) != 0) s = s + bias[16*v + l];\n"
         "          yp[l] = tj_conv_act<EP>(s, lo, hi);\n        }\n      }\n    }\n}\n"
         // Winograd F(2x2, 3x3), channels last: the 4x4 input patch at d
         // (rows dr floats apart, positions dc) as B^T d B, 16 channels at a
         // time (C a multiple of 16), point xi = 4a + b of it to V[xi*vs].
         "static inline void tj_wino_in(const float* d, int64_t dr, int64_t dc, int64_t C, float* V, int64_t vs) {\n"
         "  for (int64_t c = 0; c < C; c += 16) {\n"
         "    tj_vf16 t[4][4];\n"
         "    for (int i = 0; i < 4; ++i) {\n"
         "      const float* r = d + i*dr + c;\n"
         "      const tj_vf16 a = *(const tj_vf16u*)r, b = *(const tj_vf16u*)(r + dc), e = *(const tj_vf16u*)(r + 2*dc), f = *(const tj_vf16u*)(r + 3*dc);\n"
         "      t[i][0] = a - e, t[i][1] = b + e, t[i][2] = e - b, t[i][3] = b - f;\n    }\n"
         "    for (int j = 0; j < 4; ++j) {\n"
         "      *(tj_vf16u*)(V + j*vs + c) = t[0][j] - t[2][j];\n"
         "      *(tj_vf16u*)(V + (4 + j)*vs + c) = t[1][j] + t[2][j];\n"
         "      *(tj_vf16u*)(V + (8 + j)*vs + c) = t[2][j] - t[1][j];\n"
         "      *(tj_vf16u*)(V + (12 + j)*vs + c) = t[1][j] - t[3][j];\n    }\n  }\n}\n"
         // A tile's 2x2 outputs A^T m A from its products m[xi*ms] (the
         // channels below valid), stored at y (rows yr floats apart,
         // positions yc); the second row and column only where they are in
         // the output (down, right).
         "static inline void tj_wino_out(const float* m, int64_t ms, int64_t valid, float* y, int64_t yr, int64_t yc, bool down, bool right) {\n"
         "  const int64_t v16 = valid & ~int64_t{15};\n"
         "  for (int64_t c = 0; c < v16; c += 16) {\n"
         "    tj_vf16 s[2][4];\n"
         "    for (int b = 0; b < 4; ++b) {\n"
         "      const tj_vf16 m0 = *(const tj_vf16u*)(m + b*ms + c), m1 = *(const tj_vf16u*)(m + (4 + b)*ms + c), m2 = *(const tj_vf16u*)(m + (8 + b)*ms + c),\n"
         "                    m3 = *(const tj_vf16u*)(m + (12 + b)*ms + c);\n"
         "      s[0][b] = m0 + m1 + m2, s[1][b] = m1 - m2 - m3;\n    }\n"
         "    for (int i = 0; i < (down ? 2 : 1); ++i) {\n"
         "      *(tj_vf16u*)(y + i*yr + c) = s[i][0] + s[i][1] + s[i][2];\n"
         "      if (right) *(tj_vf16u*)(y + i*yr + yc + c) = s[i][1] - s[i][2] - s[i][3];\n    }\n  }\n"
         "  for (int64_t c = v16; c < valid; ++c) {\n"
         "    float s[2][4];\n"
         "    for (int b = 0; b < 4; ++b) s[0][b] = m[b*ms + c] + m[(4 + b)*ms + c] + m[(8 + b)*ms + c], s[1][b] = m[(4 + b)*ms + c] - m[(8 + b)*ms + c] - m[(12 + b)*ms + c];\n"
         "    for (int i = 0; i < (down ? 2 : 1); ++i) {\n"
         "      y[i*yr + c] = s[i][0] + s[i][1] + s[i][2];\n"
         "      if (right) y[i*yr + yc + c] = s[i][1] - s[i][2] - s[i][3];\n    }\n  }\n}\n"
         // Channels last, depthwise: one output position, every channel,
         // vectors of channels; w is taps first [KH*KW, C]; x at the window's
         // first tap. The taps [kh0, kh1) x [kw0, kw1) are inside the image
         // (all of them but at its border: FULL).
         "template <int KH, int KW, bool FULL>\n"
         "static inline void tj_dw_cl(const float* x, int64_t xr, int64_t xk, const float* w, int64_t C, float* y, int kh0, int kh1, int kw0, int kw1) {\n"
         "  if constexpr (FULL) kh0 = 0, kh1 = KH, kw0 = 0, kw1 = KW;\n"
         "  const int64_t C64 = C & ~int64_t{63}, C16 = C & ~int64_t{15};  // constants where C is: dead tails fold away\n"
         "  for (int64_t c = 0; c < C64; c += 64) {\n"
         "    tj_vf16 acc[4] = {};\n"
         "    for (int kh = kh0; kh < kh1; ++kh)\n#pragma GCC unroll 8\n      for (int kw = kw0; kw < kw1; ++kw) {\n"
         "        const float* xp = x + kh*xr + kw*xk + c;\n        const float* wp = w + (kh*KW + kw)*C + c;\n"
         "        for (int v = 0; v < 4; ++v) acc[v] += *(const tj_vf16u*)(xp + 16*v) * *(const tj_vf16u*)(wp + 16*v);\n      }\n"
         "    for (int v = 0; v < 4; ++v) *(tj_vf16u*)(y + c + 16*v) = acc[v];\n  }\n"
         "  for (int64_t c = C64; c < C16; c += 16) {\n"
         "    tj_vf16 acc = {};\n"
         "    for (int kh = kh0; kh < kh1; ++kh)\n      for (int kw = kw0; kw < kw1; ++kw)\n"
         "        acc += *(const tj_vf16u*)(x + kh*xr + kw*xk + c) * *(const tj_vf16u*)(w + (kh*KW + kw)*C + c);\n"
         "    *(tj_vf16u*)(y + c) = acc;\n  }\n"
         "  for (int64_t c = C16; c < C; ++c) {\n"
         "    float acc = 0;\n"
         "    for (int kh = kh0; kh < kh1; ++kh)\n      for (int kw = kw0; kw < kw1; ++kw) acc += x[kh*xr + kw*xk + c] * w[(kh*KW + kw)*C + c];\n"
         "    y[c] = acc;\n  }\n}\n"
         // Channels last, grouped, CG inputs and CG outputs per group (2, 4
         // or 8: grouped_channels_last), otherwise as tj_dw_cl: w is
         // [KH*KW, CG, M]; a vector of 16 output channels (16/CG groups)
         // sums, per tap and input j of its groups, the input vector with
         // each lane given its group's j-th channel (a shuffle) times the
         // weights' vector.
         "template <int KH, int KW, int CG, bool FULL>\n"
         "static inline void tj_gc_cl(const float* x, int64_t xr, int64_t xk, const float* w, int64_t M, float* y, int kh0, int kh1, int kw0, int kw1) {\n"
         "  if constexpr (FULL) kh0 = 0, kh1 = KH, kw0 = 0, kw1 = KW;\n"
         "  const int64_t M16 = M & ~int64_t{15};\n"
         "  for (int64_t m = 0; m < M16; m += 16) {\n"
         "    tj_vf16 acc = {};\n"
         "    for (int kh = kh0; kh < kh1; ++kh)\n      for (int kw = kw0; kw < kw1; ++kw) {\n"
         "        const tj_vf16 xv = *(const tj_vf16u*)(x + kh*xr + kw*xk + m);  // the groups' inputs: the same channels\n"
         "        const float* wp = w + (kh*KW + kw)*CG*M + m;\n"
         "#pragma GCC unroll 8\n"
         "        for (int j = 0; j < CG; ++j) {\n"
         "          tj_vi16 at;\n"
         "          for (int l = 0; l < 16; ++l) at[l] = l / CG * CG + j;\n"
         "          acc += __builtin_shuffle(xv, at) * *(const tj_vf16u*)(wp + j*M);\n        }\n      }\n"
         "    *(tj_vf16u*)(y + m) = acc;\n  }\n"
         "  for (int64_t m = M16; m < M; ++m) {\n"
         "    float acc = 0;\n"
         "    for (int kh = kh0; kh < kh1; ++kh)\n      for (int kw = kw0; kw < kw1; ++kw)\n"
         "        for (int j = 0; j < CG; ++j) acc += x[kh*xr + kw*xk + m / CG * CG + j] * w[((kh*KW + kw)*CG + j)*M + m];\n"
         "    y[m] = acc;\n  }\n}\n"
         // The same for NP positions of a row (SW columns apart, taps DW
         // columns apart; columns xk floats apart in x, positions M in y),
         // the window rows [0, nkh) from x and w (the caller starts both at
         // the first row inside the image), every column inside it. Per
         // vector of 16 channels, each input vector of a row that the run's
         // windows read is loaded once and serves every position whose
         // window holds it (3x3, stride 1, 8 positions: 10 loads for 24
         // multiply-adds, where each position reading its own taps took 24),
         // the row's KW weight vectors held. Each position sums its taps in
         // tj_dw_cl's order (rows, then columns). C < 16 channels go one at
         // a time; a last part vector is moved back to end at C (it
         // recomputes a few channels, alike). At the image's border, the
         // run's first L and last R columns lie outside it (x is at its
         // first column inside): their taps are left out, as zeros would
         // add nothing (the border positions in runs of their own, where one
         // at a time each read a weight vector per multiply-add).
         // EP: the register epilogue of tj_conv_tile_cl (bias, then ReLU
         // or a clip by constants), applied before the store.
         "template <int KH, int KW, int SW, int DW, int NP, int L = 0, int R = 0, int EP = 0>\n"
         "static inline void tj_dw_cl_run(const float* x, int64_t xr, int64_t xk, const float* w, int64_t C, float* y, int64_t M, int nkh,\n"
         "                                const float* bias = nullptr, float lo = 0, float hi = 0) {\n"
         "  constexpr int J = (NP - 1)*SW + (KW - 1)*DW + 1;\n"
         "  for (int64_t c0 = 0; c0 < C && C >= 16; c0 += 16) {\n"
         "    const int64_t c = c0 + 16 <= C ? c0 : C - 16;\n"
         "    tj_vf16 acc[NP] = {};\n"
         "    for (int kh = 0; kh < nkh; ++kh) {\n"
         "      tj_vf16 wv[KW];\n"
         "#pragma GCC unroll 16\n"
         "      for (int kw = 0; kw < KW; ++kw) wv[kw] = *(const tj_vf16u*)(w + (kh*KW + kw)*C + c);\n"
         "      const float* xp = x + kh*xr + c;\n"
         "#pragma GCC unroll 64\n"
         "      for (int j = L; j < J - R; ++j) {\n"
         "        const tj_vf16 xv = *(const tj_vf16u*)(xp + (j - L)*xk);\n"
         "#pragma GCC unroll 16\n"
         "        for (int p = 0; p < NP; ++p) {\n"
         "          const int t = j - SW*p;\n"
         "          if (t >= 0 && t % DW == 0 && t / DW < KW) acc[p] += xv * wv[t / DW];\n"
         "        }\n      }\n    }\n"
         "    for (int p = 0; p < NP; ++p) {\n"
         "      tj_vf16 s = acc[p];\n"
         "      if constexpr ((EP & 1) != 0) s = s + *(const tj_vf16u*)(bias + c);\n"
         "      *(tj_vf16u*)(y + p*M + c) = tj_conv_act<EP>(s, lo, hi);\n    }\n  }\n"
         "  if (C >= 16) return;\n"
         "  for (int p = 0; p < NP; ++p)\n"
         "    for (int64_t c = 0; c < C; ++c) {\n"
         "      float acc = 0;\n"
         "      for (int kh = 0; kh < nkh; ++kh)\n        for (int kw = 0; kw < KW; ++kw)\n"
         "          if (const int j = p*SW + kw*DW; j >= L && j < J - R) acc += x[kh*xr + (j - L)*xk + c] * w[(kh*KW + kw)*C + c];\n"
         "      if constexpr ((EP & 1) != 0) acc = acc + bias[c];\n"
         "      y[p*M + c] = tj_conv_act<EP>(acc, lo, hi);\n    }\n}\n\n";
}

// Channels last (x [N, d.., C], y [N, o.., M]), f32, at most 2 spatial
// dims, weights packed (pack_conv_weights): the input copied once with its
// zero padding into scratch [Hp, Wp, C]; then either the direct form's
// tiles of 7 positions by 64 channels (fewer channels: more positions,
// by_channel_quads), stored as whole vectors of the positions' channels (no
// transposition), or, depthwise, each output
// position's channels as vectors (tj_dw_cl). The epilogue runs with the
// channels innermost: after each tile, from its sums in L1 (tj_tile), in the
// direct forms; over each part's positions at its end, depthwise.
std::string Emitter::conv_channels_last_body(const Kernel& K) {
  const ValueId cv = K.ops[0];
  const Node& n = g_.node(cv);
  const auto sx = shape(n.inputs[0]), sw = shape(n.inputs[1]), so = shape(cv);
  const size_t k = sw.size() - 2;
  const int64_t G = n.attr_int("groups"), C_ = sx.back().value(), M = sw[0].value(), Cg = sw[1].value();
  // The direct form's tiles over blocks of `lanes` output channels: one
  // group, or groups of 16 outputs and more (each block inside a group,
  // reading the group's Cg input channels).
  const int64_t lanes = conv_quad_lanes(sw, G);
  const bool dense = lanes > 0;
  const ValueId packed = dense ? packed_conv_quads(g_, n.inputs[1], lanes) : packed_conv_taps(g_, n.inputs[1]);
  if (T(cv) != "float" || k > 2 || packed < 0) throw Error("code generation: a channels-last conv of this form (the driver lowers it to windows)");
  std::vector<int64_t> in, ker, out;
  for (size_t i = 0; i < k; ++i) in.push_back(sx[i + 1].value()), ker.push_back(sw[i + 2].value()), out.push_back(so[i + 1].value());
  Plane pl(in, ker, out, n.attr_ints("stride"), n.attr_ints("pad_begin"), n.attr_ints("dilation"));
  const bool wino = n.attr_bool("winograd");
  // Winograd: 2x2 output tiles (TH x TW of them), each reading a 4x4 patch
  // of the padded input from (2 th, 2 tw): the plane padded to 2 TH + 2 by
  // 2 TW + 2.
  const int64_t TH = (pl.OH + 1) / 2, TW = (pl.OW + 1) / 2;
  if (wino) pl.Hp = std::max(pl.Hp, 2 * TH + 2), pl.Wp = std::max(pl.Wp, 2 * TW + 2);
  const int64_t OW = pl.OW, P = pl.OH * OW, Sz = pl.H * pl.W;
  std::string code;
  // An input that is a strided view (the NCHW image a channels-last net
  // starts from, transposed) goes into the padded copy from where it lies,
  // rather than through a dense copy of its own first.
  std::optional<Strided> view;
  if (auto st = strided(n.inputs[0]); dense && pl.padded() && st && st->strides != contiguous_strides(sx)) view = st;
  const std::string X = view ? "" : dense_operand(n.inputs[0], &code), B = n.inputs.size() > 2 ? dense_operand(n.inputs[2], &code) : "";
  const std::string Nn = C(so[0]), Y = ptr(cv), Wp_ = ptr(packed);
  const bool epilogue = !B.empty() || K.ops.size() > 1;
  const RegisterEpilogue rep = epilogue ? register_epilogue(g_, K, cv, !B.empty()) : RegisterEpilogue{};
  // The tile's trailing arguments and output for a register epilogue.
  const std::string rep_args = rep.bits ? ", " + (B.empty() ? std::string("nullptr") : B + " + m0") + ", " + codegen::literal(rep.lo, DType::f32) + ", " +
                                                    codegen::literal(rep.hi, DType::f32) : "";
  const std::string rep_out = rep.bits ? ptr(rep.out) : "";
  // A direct tile's call up to its "(": tj_conv_tile_cl<NP, NV, KH, KW>,
  // with ACC, WS and EP where any differs from the defaults.
  auto tile_head = [](int64_t np, int nv, int64_t kh, int64_t kw, bool acc, int64_t ws, int ep) {
    std::string h = "tj_conv_tile_cl<" + S(np) + ", " + std::to_string(nv) + ", " + S(kh) + ", " + S(kw);
    if (acc || ws != 64 || ep) h += std::string(acc ? ", true" : ", false") + ", " + S(ws) + (ep ? ", " + std::to_string(ep) : "");
    return h + ">(";
  };
  // With an epilogue, a one-group tile stores its sums into tj_tile, a
  // buffer of kTileFloats in L1 (64 floats a position), and the epilogue
  // reads them there, storing them to y only where the conv's value is one
  // of the kernel's outputs: otherwise the sums never reach memory
  // (efficientnet_b0's 112x112 16->96 conv with SiLU wrote 4.8 MB of sums
  // and read them back: 500 -> 447 us). The epilogue covers each tile's new
  // positions only, once each, so tiles may overlap.
  // The epilogue over channels [m0, m1) at output positions [q0, q1) of
  // image b; with `t0`, the sums from tj_tile, whose first position is t0
  // and whose positions are `ts` floats apart.
  auto epilogue_over = [&](const std::string& m0, const std::string& m1, const std::string& q0, const std::string& q1, const std::string& t0 = "",
                           int64_t ts = 64) {
    if (!epilogue) return std::string();
    Idx iv{"b"};
    std::string open = "      for (int64_t q = " + q0 + "; q < " + q1 + "; ++q) {\n";
    if (k == 2) open += "        const int64_t o0 = q / " + S(OW) + ", ow = q % " + S(OW) + ";\n", iv.push_back("o0");
    else open += "        const int64_t ow = q;\n";
    iv.push_back("ow"), iv.push_back("mc");
    open += "#pragma omp simd\n        for (int64_t mc = " + m0 + "; mc < " + m1 + "; ++mc) {\n";
    local_.clear();
    std::string body;
    const std::string at = "((b*" + S(P) + " + q)*" + S(M) + " + mc)";
    const std::string sums = t0.empty() ? Y + "[" + at + "]" : "tj_tile[(q - " + t0 + ")*" + S(ts) + " + (mc - " + m0 + ")]";
    if (!B.empty() || !t0.empty()) {
      body += "          const float v" + S(cv) + " = " + sums + (B.empty() ? "" : " + " + B + "[mc]") + ";\n";
      if (std::find(K.outputs.begin(), K.outputs.end(), cv) != K.outputs.end()) body += "          " + Y + "[" + at + "] = v" + S(cv) + ";\n";
      local_[cv] = "v" + S(cv);
    }
    body += pointwise_statements(K, 1, iv, so, "          ");
    local_.clear();
    return open + body + "        }\n      }\n";
  };
  uses_direct_conv_ = true;
  const int64_t Hp = pl.Hp, Wp = pl.Wp, row = (dense ? Wp : pl.W) * C_;
  // The 1x1 form (stride 1, no padding): its positions are one run. Its
  // input channels are a value read at run time (lift): 1x1 convs that
  // differ only in them (densenet's, after each concat) share one function.
  const bool flat = !wino && G == 1 && pl.KH * pl.KW == 1 && pl.SH == 1 && pl.SW == 1 && !pl.padded() && P >= 2 * kTilePositions;
  const std::string Cx = flat ? lift(C_) : S(C_);
  code += "  for (int64_t b = 0; b < " + Nn + "; ++b) {\n";
  if (!view) code += "    const float* xb = " + X + " + b*" + (flat ? S(Sz) + "*" + Cx : S(Sz * C_)) + ";\n";
  if (dense && pl.padded()) {
    // The image with its zero padding: border rows zeroed, then each image
    // row with its left and right pads (separate loops: see Plane::copy).
    scratch(Dim(0));
    out_.scratch_sizes.back() = Dim(Hp * row * 4);
    code += "    float* xpad = (float*)" + slot(tj_slot_scratch) + ";\n";
    if (pl.PH > 0) code += "    for (int64_t i = 0; i < " + S(pl.PH * row) + "; ++i) xpad[i] = 0;\n";
    if (Hp > pl.PH + pl.H) code += "    for (int64_t i = " + S((pl.PH + pl.H) * row) + "; i < " + S(Hp * row) + "; ++i) xpad[i] = 0;\n";
    code += "    " + open_parallel(S(pl.H));
    code += "      float* d = xpad + (tj_part + " + S(pl.PH) + ")*" + S(row) + ";\n";
    if (pl.PW > 0) code += "      for (int64_t i = 0; i < " + S(pl.PW * C_) + "; ++i) d[i] = 0;\n";
    if (view) {  // x [N, (H,) W, C] at its strides
      const Sizes& st = view->strides;
      code += "      const float* s = " + ptr(view->base) + " + " + C(view->offset) + " + b*" + C(st[0]) + (k == 2 ? " + tj_part*" + C(st[1]) : "") + ";\n";
      code += "      for (int64_t w = 0; w < " + S(pl.W) + "; ++w)\n        for (int64_t c = 0; c < " + S(C_) + "; ++c) d[" + S(pl.PW * C_) + " + w*" + S(C_) +
              " + c] = s[w*" + C(st[k]) + " + c*" + C(st[k + 1]) + "];\n";
    } else {
      code += "      const float* s = xb + tj_part*" + S(pl.W * C_) + ";\n";
      code += "      for (int64_t i = 0; i < " + S(pl.W * C_) + "; ++i) d[" + S(pl.PW * C_) + " + i] = s[i];\n";
    }
    if (Wp > pl.PW + pl.W) code += "      for (int64_t i = " + S((pl.PW + pl.W) * C_) + "; i < " + S(row) + "; ++i) d[i] = 0;\n";
    code += "    " + close_parallel();
  } else {
    code += "    const float* xpad = xb;\n";  // no padding (1x1), or depthwise: its taps skip the border
  }
  if (wino) {
    // Winograd F(2x2, 3x3) (u: passes/winograd_weights.cpp). Parts of
    // whole tile rows by 64 output channels, about kWinogradTiles tiles
    // each and at least kConvParts with the channel blocks. Per part, in
    // this thread's scratch: V [16][T][C], each tile's input patch as B^T d B
    // (tj_wino_in); then per point xi of the domain a GEMM of V[xi] [T, C]
    // by u's [C, 64] (the 1x1 form's tiles, tj_conv_tile_cl) into
    // Mb [16][T][64]; then each tile's 2x2 outputs A^T m A (tj_wino_out)
    // into y, and the epilogue over the part's output rows. The input
    // transform is redone per block of 64 output channels (about 6% of the
    // GEMM's work at 64 channels, less past them).
    const int64_t cb = 64, cbn = (M + cb - 1) / cb;
    const int64_t TB = even_blocks(cbn, std::min<int64_t>(TH, std::max<int64_t>((kConvParts + cbn - 1) / cbn, (TH * TW + kWinogradTiles - 1) / kWinogradTiles)), TH);
    const int64_t Tmax = (TH + TB - 1) / TB * TW, Tmin = TH / TB * TW;
    const int64_t Sx = pl.padded() ? (Hp * row * 4 + 63) / 64 * 64 : 0, Sv = (16 * Tmax * C_ * 4 + 63) / 64 * 64, Sm = 16 * Tmax * cb * 4;
    if (!pl.padded()) scratch(Dim(0));
    out_.scratch_sizes.back() = Dim(Sx + Sv + Sm);  // per thread; the first one's starts with the padded input
    code += "    " + open_parallel(S(cbn * TB));
    code += "      const int64_t pr = tj_part / " + S(TB) + ", tb = tj_part % " + S(TB) + ";\n";
    code += "      const int64_t r0 = tb*" + S(TH) + "/" + S(TB) + ", r1 = (tb + 1)*" + S(TH) + "/" + S(TB) + ", T = (r1 - r0)*" + S(TW) + ";\n";
    code += "      const int64_t m0 = pr*" + S(cb) + ", valid = std::min<int64_t>(" + S(cb) + ", " + S(M) + " - m0);\n";
    code += "      float* V = (float*)((char*)" + slot(tj_slot_scratch) + " + tj_thread*" + S(Sx + Sv + Sm) + " + " + S(Sx) + ");\n";
    code += "      float* Mb = V + " + S(Sv / 4) + ";\n";
    code += "      for (int64_t t = 0; t < T; ++t)\n        tj_wino_in(xpad + ((r0 + t/" + S(TW) + ")*" + S(2 * row) + " + t%" + S(TW) + "*" + S(2 * C_) + "), " + S(row) +
            ", " + S(C_) + ", " + S(C_) + ", V + t*" + S(C_) + ", " + S(Tmax * C_) + ");\n";
    code += "      const float* u = " + ptr(n.inputs[3]) + " + pr*" + S(16 * C_ * cb) + ";\n";
    code += "      for (int xi = 0; xi < 16; ++xi) {\n";
    code += "        const float* vx = V + xi*" + S(Tmax * C_) + ";\n        float* mx = Mb + xi*" + S(Tmax * cb) + ";\n";
    auto tiles = [&](int nv) {
      // Every part holds at least Tmin >= np tiles: one moved back to end at T stays inside.
      const int64_t np = row_tiles(Tmin, kWideTilePositions[nv]).np;
      return "        for (int64_t q = 0; q < T; q += " + S(np) + ") {\n          const int64_t at = std::min<int64_t>(q, T - " + S(np) + ");\n          " +
             tile_head(np, nv, 1, 1, false, 64, 0) + "vx + at*" + S(C_) + ", " + S(C_) + ", 0, 0, u + xi*" + S(C_ * cb) + ", 0, " + S(C_) + ", mx + at*" +
             S(cb) + ", " + S(cb) + ", valid);\n        }\n";
    };
    code += by_channel_quads(M, tiles, "        ") + "      }\n";
    code += "      float* yb = " + Y + " + b*" + S(P * M) + " + m0;\n";
    code += "      for (int64_t t = 0; t < T; ++t) {\n        const int64_t oh = 2*(r0 + t/" + S(TW) + "), ow = 2*(t%" + S(TW) + ");\n";
    code += "        tj_wino_out(Mb + t*" + S(cb) + ", " + S(Tmax * cb) + ", valid, yb + (oh*" + S(OW) + " + ow)*" + S(M) + ", " + S(OW * M) + ", " + S(M) +
            ", oh + 1 < " + S(pl.OH) + ", ow + 1 < " + S(OW) + ");\n      }\n";
    if (epilogue) code += "      {\n" + epilogue_over("m0", "m0 + valid", "2*r0*" + S(OW), "std::min<int64_t>(" + S(pl.OH) + ", 2*r1)*" + S(OW)) + "      }\n";
    code += "    " + close_parallel() + "  }\n";
    return code;
  }
  const std::string xr = S(pl.DH * row), xk = S(pl.DW * C_);
  if (flat) {
    // 1x1, stride 1, no padding: the positions are one run, x's C apart and
    // y's M: parts of at least kDirectPositions of them (or all) by 64
    // channels, equal tiles across the rows (a 7x7 image is 49 positions, 7
    // tiles of 7 by 4 vectors), the last one of a part ending at the part's
    // end.
    // At least kConvParts parts over positions and channel blocks together
    // where the positions allow parts of 2*kTilePositions (a 28x28 1x1 conv
    // to 24 channels was one part: one thread worked, the others waited).
    const int64_t cb = 64, cbn = (M + cb - 1) / cb;
    const int64_t blocks = even_blocks(cbn, std::max<int64_t>({1, P / kDirectPositions, std::min<int64_t>((kConvParts + cbn - 1) / cbn, P / (2 * kTilePositions))}),
                                       std::max<int64_t>(1, P / (2 * kTilePositions)));
    code += "    " + open_parallel(S(cbn * blocks));
    code += "      const int64_t pr = tj_part / " + S(blocks) + ", blk = tj_part % " + S(blocks) + ";\n";
    code += "      const int64_t q0 = blk*" + S(P / blocks) + ", q1 = blk + 1 == " + S(blocks) + " ? " + S(P) + " : q0 + " + S(P / blocks) + ";\n";
    code += "      const int64_t m0 = pr*" + S(cb) + ", valid = std::min<int64_t>(" + S(cb) + ", " + S(M) + " - m0);\n";
    code += "      const float* wp = " + Wp_ + " + pr*" + S(cb) + "*" + Cx + ";\n";
    code += "      float* yb = " + (rep.bits ? rep_out : Y) + " + b*" + S(P * M) + " + m0;\n";
    const bool tiled = epilogue && !rep.bits;
    if (tiled) code += "      alignas(64) float tj_tile[" + S(kTileFloats) + "];\n";
    auto tiles = [&](int nv) {
      const int64_t np = row_tiles(P / blocks, kWideTilePositions[nv]).np;
      const std::string y = tiled ? "tj_tile, 64" : "yb + at*" + S(M) + ", " + S(M);
      return "        for (int64_t q = q0; q < q1; q += " + S(np) + ") {\n          const int64_t at = std::min<int64_t>(q, q1 - " + S(np) +
             ");\n          " + tile_head(np, nv, 1, 1, false, 64, rep.bits) + "xpad + at*" + Cx + ", " + Cx + ", 0, 0, wp, 0, " + Cx + ", " + y + ", valid" + rep_args + ");\n" +
             (tiled ? "          const int64_t tj_n0 = q, tj_n1 = std::min<int64_t>(q + " + S(np) + ", q1);\n" +  // the tile's new positions
                            epilogue_over("m0", whole_end(M, nv), "tj_n0", "tj_n1", "at")
                      : "") +
             "        }\n";
    };
    // Every part holds at least 2*kTilePositions >= np positions, so a tile moved
    // back to end at q1 stays within its part.
    code += by_channel_quads(M, tiles, "      ");
    code += "    " + close_parallel() + "  }\n";
    return code;
  }
  if (dense) {
    // Parts of whole rows, about kDirectPositions positions each, and at
    // least kConvParts with the channel blocks where the rows allow. In
    // groups, block pr reads its group's Cg input channels, from
    // channel pr / (Mg / lanes) * Cg of each position.
    const int64_t cb = lanes, cbn = (M + cb - 1) / cb, row_parts = (kConvParts + cbn - 1) / cbn;
    int64_t RB = std::max<int64_t>(1, std::min<int64_t>({pl.OH, (kDirectPositions + OW - 1) / OW, (pl.OH + row_parts - 1) / row_parts}));
    // An even count of parts where a few more rows' parts make one (112 rows
    // by 5 are 23 parts; by 4, 28)
    for (int64_t rows = (pl.OH + RB - 1) / RB; rows <= std::min<int64_t>(pl.OH, 2 * ((pl.OH + RB - 1) / RB)); ++rows)
      if (const int64_t rb = (pl.OH + rows - 1) / rows; (cbn * ((pl.OH + rb - 1) / rb)) % 2 == 0) {
        RB = rb;
        break;
      }
    const int64_t RBs = (pl.OH + RB - 1) / RB;
    const std::string wt = S(Cg * cb);  // the taps' distance in a block's weights
    code += "    " + open_parallel(S(cbn * RBs));
    code += "      const int64_t pr = tj_part / " + S(RBs) + ", r0 = tj_part % " + S(RBs) + " * " + S(RB) + ", r1 = std::min<int64_t>(" + S(pl.OH) + ", r0 + " +
            S(RB) + ");\n";
    code += "      const int64_t m0 = pr*" + S(cb) + ", valid = std::min<int64_t>(" + S(cb) + ", " + S(M) + " - m0);\n";
    code += "      const float* wp = " + Wp_ + " + pr*" + S(pl.KH * pl.KW * Cg * cb) + ";\n";
    const std::string group_at = G == 1 ? "" : " + pr/" + S(M / G / cb) + "*" + S(Cg);
    // A part whose weights outgrow the cache goes over its rows once per
    // block of Cb input channels, the sums kept in y between blocks (each
    // weight read from memory once per part, not once per row), the
    // epilogue after each tile of the last block, while it is in L1. That
    // needs tiles that never overlap, rows a multiple of their tiles: a
    // block's sums would be added twice where they do. Without blocks, the
    // sums go to tj_tile.
    const bool exact = tiles_exactly(M, OW, {OW});
    const int64_t Cb = exact && G == 1 ? conv_channel_block(Cg, pl.KH * pl.KW * cb) : Cg, cbs = (Cg + Cb - 1) / Cb;
    // Without blocks, a register epilogue (rep) stores the tiles' results
    // straight into its output; otherwise the sums go to tj_tile.
    const bool regt = rep.bits && cbs == 1, tiled = epilogue && cbs == 1 && !regt;
    code += "      float* yb = " + (regt ? rep_out : Y) + " + b*" + S(P * M) + " + m0;\n";
    if (tiled) code += "      alignas(64) float tj_tile[" + S(kTileFloats) + "];\n";
    if (cbs > 1) code += "      for (int64_t cbk = 0; cbk < " + S(cbs) + "; ++cbk) {\n";
    code += "      for (int64_t oh = r0; oh < r1; ++oh) {\n";
    code += "        const float* xrow = xpad + oh*" + S(pl.SH * row) + group_at + (cbs > 1 ? " + cbk*" + S(Cb) : "") + ";\n";
    auto tiles = [&](int nv) {
      const RowTiles rt = row_tiles(OW, kWideTilePositions[nv]);
      const int64_t count = rt.count, np = rt.np;
      auto call = [&](bool acc, const std::string& c, const std::string& at) {
        return at + tile_head(np, nv, pl.KH, pl.KW, acc, cb, regt ? rep.bits : 0) + "xrow + ow*" + S(pl.SW * C_) + ", " +
               S(pl.SW * C_) + ", " + xr + ", " + xk + ", wp" + (cbs > 1 ? " + cbk*" + S(Cb * cb) : "") + ", " + wt + ", " + c + ", " +
               (tiled ? "tj_tile, 64" : "yb + (oh*" + S(OW) + " + ow)*" + S(M) + ", " + S(M)) + ", valid" + (regt ? rep_args : "") + ");\n";
      };
      std::string body = "          for (int64_t i = 0; i < " + S(count) + "; ++i) {\n            const int64_t ow = std::min<int64_t>(i*" + S(np) + ", " + S(OW - np) +
                         ");\n";
      if (cbs == 1) body += call(false, S(Cg), "            ");
      else
        body += "            const int64_t cn = std::min<int64_t>(" + S(Cb) + ", " + S(Cg) + " - cbk*" + S(Cb) + ");\n            if (cbk == 0) " +
                call(false, "cn", "") + "            else " + call(true, "cn", "");
      const std::string at = "oh*" + S(OW) + " + ow";
      if (cbs > 1 && epilogue)
        body += "            if (cbk == " + S(cbs - 1) + ") {\n" + epilogue_over("m0", whole_end(M, nv), at, at + " + " + S(np)) + "            }\n";
      if (tiled)  // the tile's new positions, [i*np, min((i + 1)*np, OW)) of the row
        body += "            const int64_t tj_t0 = " + at + ";\n" +
                epilogue_over("m0", whole_end(M, nv), "oh*" + S(OW) + " + i*" + S(np), "oh*" + S(OW) + " + std::min<int64_t>((i + 1)*" + S(np) + ", " + S(OW) + ")",
                              "tj_t0");
      return body + "          }\n";
    };
    code += (G == 1 ? by_channel_quads(M, tiles, "        ") : tiles(static_cast<int>(cb / 16))) + "      }\n";
    if (cbs > 1) code += "      }\n";
    code += "    " + close_parallel() + "  }\n";
    return code;
  }
  // Depthwise, or grouped (Cg inputs and outputs per group: tj_gc_cl, the
  // same loops): parts of whole output rows, about kDepthwiseOutputs outputs each.
  const std::string one = Cg == 1 ? "tj_dw_cl<" + S(pl.KH) + ", " + S(pl.KW) + ", " : "tj_gc_cl<" + S(pl.KH) + ", " + S(pl.KW) + ", " + S(Cg) + ", ";
  const int64_t RB = std::max<int64_t>(1, std::min<int64_t>(pl.OH, kDepthwiseOutputs / std::max<int64_t>(1, OW * C_))), RBs = (pl.OH + RB - 1) / RB;
  code += "    " + open_parallel(S(RBs));
  code += "      const int64_t r0 = tj_part*" + S(RB) + ", r1 = std::min<int64_t>(" + S(pl.OH) + ", r0 + " + S(RB) + ");\n";
  // The output columns whose windows are inside the image, [lo, hi):
  // depthwise, in runs of up to kDwRun (tj_dw_cl_run, equal runs, the last
  // one moved back to end at hi); the columns outside them one at a time.
  // (hi: the last column whose window ends inside, plus one; none when
  // even column 0's window ends past the image: C++ division truncates)
  const int64_t last_in = pl.W - 1 + pl.PW - (pl.KW - 1) * pl.DW;
  const int64_t lo = std::min(OW, (pl.PW + pl.SW - 1) / pl.SW), hi = std::max(lo, last_in < 0 ? int64_t(0) : std::min(OW, last_in / pl.SW + 1));
  const bool runs = Cg == 1 && hi > lo;
  const RowTiles rt = row_tiles(std::max<int64_t>(1, hi - lo), kDwRun);
  // With an epilogue, each group of columns (the left border, a run, the
  // right border) stores its sums into tj_tile, on the part's stack, and the
  // epilogue runs over them right after, from L1: the sums never reach y
  // unless the conv's value is itself a kernel output (efficientnet's and
  // mobilenet's depthwise convs with bias and clip wrote 1.8 MB of sums at
  // 56x56x144 and read them back a row later).
  // Where every column goes in runs (the borders too) and the epilogue is
  // a bias and at most a ReLU or a clip by constants, the runs apply it in
  // registers and store to the kernel's output: no tile, no second pass.
  const bool all_runs = runs && lo <= kDwRun && OW - hi <= kDwRun;
  const RegisterEpilogue drep = all_runs ? rep : RegisterEpilogue{};
  const int64_t TN = runs ? std::max({lo, OW - hi, rt.np}) : OW;
  const bool tiled = epilogue && !drep.bits && TN * M * 4 <= kDepthwiseTileBytes;
  if (tiled) code += "      alignas(64) float tj_tile[" + S(TN * M) + "];\n";
  // Per output position the window's first tap (khi, kwi), which may lie in
  // the padding; the taps inside the image are [kh0, kh1) x [kw0, kw1). Its
  // sums go to `to`.
  auto yat = [&](const std::string& ow, const std::string& g0) {
    return tiled ? "tj_tile + (" + ow + " - " + g0 + ")*" + S(M)
                 : (drep.bits ? ptr(drep.out) : Y) + " + ((b*" + S(pl.OH) + " + oh)*" + S(OW) + " + " + ow + ")*" + S(M);
  };
  // The epilogue over columns [c0, c1) of the row, from the tile, whose
  // first column is t0. A run moved back over columns done already covers
  // only its new ones: an epilogue that read its own output (a donated
  // residual) must run once per position.
  auto epilogue_cols = [&](const std::string& t0, const std::string& c0, const std::string& c1) {
    if (!tiled) return std::string();
    return "      {\n        const int64_t tj_t0 = oh*" + S(OW) + " + " + t0 + ";\n" +
           epilogue_over("0", S(M), "oh*" + S(OW) + " + " + c0, "oh*" + S(OW) + " + " + c1, "tj_t0", M) + "      }\n";
  };
  auto one_at_a_time = [&](int64_t from, int64_t to) {
    if (from >= to) return std::string();
    const std::string at = "xpad + (khi*" + S(pl.W) + " + kwi)*" + S(C_) + ", " + xr + ", " + xk + ", " + Wp_ + ", " + S(C_) + ", " + yat("ow", S(from));
    return "      for (int64_t ow = " + S(from) + "; ow < " + S(to) + "; ++ow) {\n" + tap_range("ow", pl.SW, pl.PW, pl.DW, pl.KW, pl.W, "kw", "        ") +
           "        if (kh0 == 0 && kh1 == " + S(pl.KH) + " && kw0 == 0 && kw1 == " + S(pl.KW) + ") " + one + "true>(" + at + ", 0, 0, 0, 0);\n" +
           "        else " + one + "false>(" + at + ", kh0, kh1, kw0, kw1);\n      }\n" + epilogue_cols(S(from), S(from), S(to));
  };
  code += "      for (int64_t oh = r0; oh < r1; ++oh) {\n" + tap_range("oh", pl.SH, pl.PH, pl.DH, pl.KH, pl.H, "kh", "        ");
  // The border columns [from, to) as one run (at most kDwRun, the taps
  // outside left out) where they are a run's width: its first column
  // from*SW - PW, L of them left of the image, R right of it.
  // A run of np positions from column ow (its first input column `col`
  // inside the image, L and R of its columns outside).
  auto run_call = [&](int64_t np, int64_t L, int64_t R, const std::string& col) {
    std::string head = "tj_dw_cl_run<" + S(pl.KH) + ", " + S(pl.KW) + ", " + S(pl.SW) + ", " + S(pl.DW) + ", " + S(np);
    if (L || R || drep.bits) head += ", " + S(L) + ", " + S(R) + (drep.bits ? ", " + std::to_string(drep.bits) : "");
    const std::string ep = drep.bits ? ", " + (B.empty() ? std::string("nullptr") : B) + ", " + codegen::literal(drep.lo, DType::f32) + ", " +
                                           codegen::literal(drep.hi, DType::f32)
                                     : "";
    return "        " + head + ">(xpad + ((khi + kh0*" + S(pl.DH) + ")*" + S(pl.W) + " + " + col + ")*" + S(C_) + ", " + xr + ", " + S(C_) + ", " + Wp_ +
           " + kh0*" + S(pl.KW * C_) + ", " + S(C_) + ", " + yat("ow", "ow") + ", " + S(M) + ", kh1 - kh0" + ep + ");\n";
  };
  auto border_run = [&](int64_t from, int64_t to) {
    if (from >= to || to - from > kDwRun) return one_at_a_time(from, to);
    const int64_t np = to - from, first = from * pl.SW - pl.PW, J = (np - 1) * pl.SW + (pl.KW - 1) * pl.DW + 1;
    const int64_t L = std::max<int64_t>(0, -first), R = std::max<int64_t>(0, first + J - pl.W);
    return "      {\n        const int64_t ow = " + S(from) + ";\n" + run_call(np, L, R, S(first + L)) + "      }\n" + epilogue_cols(S(from), S(from), S(to));
  };
  if (runs) {
    code += border_run(0, lo);
    code += "      for (int64_t i = 0; i < " + S(rt.count) + "; ++i) {\n        const int64_t ow = " + S(lo) + " + std::min<int64_t>(i*" + S(rt.np) + ", " +
            S(hi - lo - rt.np) + ");\n";
    code += run_call(rt.np, 0, 0, "ow*" + S(pl.SW) + " - " + S(pl.PW));
    code += epilogue_cols("ow", S(lo) + " + i*" + S(rt.np), "ow + " + S(rt.np)) + "      }\n";
    code += border_run(hi, OW);
  } else {
    code += one_at_a_time(0, OW);
  }
  code += "      }\n";
  if (epilogue && !tiled && !drep.bits) code += "      {\n" + epilogue_over("0", S(M), "r0*" + S(OW), "r1*" + S(OW)) + "      }\n";
  code += "    " + close_parallel() + "  }\n";
  return code;
}

}  // namespace tj::cpp
