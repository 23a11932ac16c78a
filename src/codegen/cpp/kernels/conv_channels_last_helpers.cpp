// The C++ emitter's channels-last convolution helpers: the register tiles,
// Winograd transforms and depthwise runs that conv_channels_last.cpp's
// kernels call, as text for the generated program's prelude.
#include "codegen/cpp/emitter.h"

namespace tj::cpp {

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
         // The tile in sub-tiles that fit the registers, each SP positions by
         // SU of the CPU's vectors: the whole tile with AVX-512 (at most 28
         // accumulators of 32 registers); without it 6 positions by 2
         // vectors (12 of 16 registers: 28 pairs of AVX2 halves spilled), the
         // positions in even chunks. A sub-tile sums every tap and input
         // channel, so each output sums in the same order in any of them;
         // its weights (a vector's few KB a tap) come again from the caches
         // for the next chunk of positions. KWW: the weights' taps per
         // kernel row, of which the tile takes KW from w (a tile whose
         // positions read the image through only some kernel columns).
         "template <int SP, int SU, int KH, int KW, bool ACC, int WS, int EP, int KWW>\n"
         "__attribute__((always_inline)) static inline void tj_conv_sub_cl(const float* x, int64_t xs, int64_t xr, int64_t xk, const float* w, int64_t wt,\n"
         "                                                                int64_t C, float* y, int64_t ym, int64_t valid, int u0, const float* bias,\n"
         "                                                                float lo, float hi) {\n"
         "  tj_vfn acc[SP][SU];\n"
         "  for (int p = 0; p < SP; ++p)\n    for (int u = 0; u < SU; ++u) {\n"
         "      acc[p][u] = tj_vfn{};\n"
         "      if constexpr (ACC) {\n"
         "        const int64_t l0 = tj_lanes*(u0 + u);\n"
         "        const float* yp = y + p*ym + l0;\n"
         "        if (l0 + tj_lanes <= valid) acc[p][u] = *(const tj_vfnu*)yp;\n"
         "        else for (int64_t l = 0; l < valid - l0; ++l) acc[p][u][l] = yp[l];\n      }\n    }\n"
         "  for (int kh = 0; kh < KH; ++kh)\n    for (int kw = 0; kw < KW; ++kw) {\n"
         "      const float* xk_ = x + kh*xr + kw*xk;\n      const float* wk = w + (kh*KWW + kw)*wt + tj_lanes*u0;\n"
         "      for (int64_t c = 0; c < C; ++c) {\n"
         "        tj_vfn wv[SU];\n"
         "        for (int u = 0; u < SU; ++u) wv[u] = *(const tj_vfnu*)(wk + c*WS + u*tj_lanes);\n"
         "#pragma GCC unroll 24\n"
         "        for (int p = 0; p < SP; ++p) {\n"
         "          const float xv = xk_[p*xs + c];\n"
         "          for (int u = 0; u < SU; ++u) acc[p][u] += xv*wv[u];\n"
         "        }\n      }\n    }\n"
         "  for (int p = 0; p < SP; ++p)\n    for (int u = 0; u < SU; ++u) {\n"
         "      const int64_t l0 = tj_lanes*(u0 + u);\n"
         "      float* yp = y + p*ym + l0;\n"
         "      if (l0 + tj_lanes <= valid) {\n"
         "        tj_vfn s = acc[p][u];\n"
         "        if constexpr ((EP & 1) != 0) s = s + *(const tj_vfnu*)(bias + l0);\n"
         "        *(tj_vfnu*)yp = tj_conv_act<EP>(s, lo, hi);\n"
         "      } else {\n"
         "        for (int64_t l = 0; l < valid - l0; ++l) {\n"
         "          float s = acc[p][u][l];\n"
         "          if constexpr ((EP & 1) != 0) s = s + bias[l0 + l];\n"
         "          yp[l] = tj_conv_act<EP>(s, lo, hi);\n        }\n      }\n    }\n}\n"
         "template <int NP, int NV, int KH, int KW, bool ACC = false, int WS = 64, int EP = 0, int KWW = KW>\n"
         "__attribute__((noinline)) static void tj_conv_tile_cl(const float* x, int64_t xs, int64_t xr, int64_t xk, const float* w, int64_t wt, int64_t C, float* y,\n"
         "                                   int64_t ym, int64_t valid, const float* bias = nullptr, float lo = 0, float hi = 0) {\n"
         "  constexpr int NU = NV*tj_per16, SU = tj_per16 == 1 ? NU : 2, NC = tj_per16 == 1 ? 1 : (NP + 5)/6;\n"
         "  constexpr int SPa = (NP + NC - 1)/NC, SPb = NP - (NC - 1)*SPa;\n"
         "  for (int u0 = 0; u0 < NU && tj_lanes*u0 < valid; u0 += SU) {\n"
         "    for (int ch = 0; ch + 1 < NC; ++ch)\n"
         "      tj_conv_sub_cl<SPa, SU, KH, KW, ACC, WS, EP, KWW>(x + ch*SPa*xs, xs, xr, xk, w, wt, C, y + ch*SPa*ym, ym, valid, u0, bias, lo, hi);\n"
         "    tj_conv_sub_cl<SPb, SU, KH, KW, ACC, WS, EP, KWW>(x + (NC - 1)*SPa*xs, xs, xr, xk, w, wt, C, y + (NC - 1)*SPa*ym, ym, valid, u0, bias, lo, hi);\n"
         "  }\n}\n"
         // Winograd F(m x m, 3x3), m = 2 or 4, a = m + 2: B^T and A^T
         // applied to a points x[0..a) (vectors or floats alike).
         "template <class V>\nstatic inline void tj_wino_bt(const V* x, V* r, int m) {\n"
         "  if (m == 2) { r[0] = x[0] - x[2], r[1] = x[1] + x[2], r[2] = x[2] - x[1], r[3] = x[1] - x[3]; return; }\n"
         "  const V p = x[4] - 4.0f*x[2], q = x[3] - 4.0f*x[1], s = x[4] - x[2], t = 2.0f*(x[3] - x[1]);\n"
         "  r[0] = 4.0f*x[0] - 5.0f*x[2] + x[4], r[1] = p + q, r[2] = p - q, r[3] = s + t, r[4] = s - t, r[5] = 4.0f*x[1] - 5.0f*x[3] + x[5];\n}\n"
         "template <class V>\nstatic inline void tj_wino_at(const V* v, V* o, int m) {\n"
         "  if (m == 2) { o[0] = v[0] + v[1] + v[2], o[1] = v[1] - v[2] - v[3]; return; }\n"
         "  const V p = v[1] + v[2], q = v[1] - v[2], s = v[3] + v[4], t = v[3] - v[4];\n"
         "  o[0] = v[0] + p + s, o[1] = q + 2.0f*t, o[2] = p + 4.0f*s, o[3] = q + 8.0f*t + v[5];\n}\n"
         // The a x a input patch at d (rows dr floats apart, positions dc) as
         // B^T d B, a vector of channels at a time (C a multiple of 16), point
         // xi = a*i + j of it to V[xi*vs].
         "template <int M>\n"
         "static inline void tj_wino_in(const float* d, int64_t dr, int64_t dc, int64_t C, float* V, int64_t vs) {\n"
         "  constexpr int A = M + 2;\n"
         "  for (int64_t c = 0; c < C; c += tj_lanes) {\n"
         "    tj_vfn t[A][A];\n"
         "    for (int i = 0; i < A; ++i) {\n"
         "      tj_vfn x[A];\n"
         "      for (int k = 0; k < A; ++k) x[k] = *(const tj_vfnu*)(d + i*dr + k*dc + c);\n"
         "      tj_wino_bt(x, t[i], M);\n    }\n"
         "    for (int j = 0; j < A; ++j) {\n"
         "      tj_vfn x[A], r[A];\n"
         "      for (int i = 0; i < A; ++i) x[i] = t[i][j];\n"
         "      tj_wino_bt(x, r, M);\n"
         "      for (int i = 0; i < A; ++i) *(tj_vfnu*)(V + (A*i + j)*vs + c) = r[i];\n    }\n  }\n}\n"
         // A tile's m x m outputs A^T m A from its products m[xi*ms] (the
         // channels below valid), stored at y (rows yr floats apart,
         // positions yc); only its first `rows` rows and `cols` columns,
         // those inside the output. V: a vector of channels or a float
         // (tj_wino_ld and tj_wino_st read and write either at any address;
         // a template argument would lose tj_vfnu's alignment).
         "static inline void tj_wino_ld(tj_vfn& v, const float* p) { v = *(const tj_vfnu*)p; }\n"
         "static inline void tj_wino_ld(float& v, const float* p) { v = *p; }\n"
         "static inline void tj_wino_st(float* p, const tj_vfn& v) { *(tj_vfnu*)p = v; }\n"
         "static inline void tj_wino_st(float* p, float v) { *p = v; }\n"
         "template <int M, class V>\n"
         "static inline void tj_wino_out_at(const float* m, int64_t ms, int64_t c, float* y, int64_t yr, int64_t yc, int rows, int cols) {\n"
         "  constexpr int A = M + 2;\n"
         "  V s[M][A];\n"
         "  for (int b = 0; b < A; ++b) {\n"
         "    V v[A], o[M];\n"
         "    for (int a = 0; a < A; ++a) tj_wino_ld(v[a], m + (A*a + b)*ms + c);\n"
         "    tj_wino_at(v, o, M);\n"
         "    for (int i = 0; i < M; ++i) s[i][b] = o[i];\n  }\n"
         "  for (int i = 0; i < rows; ++i) {\n"
         "    V o[M];\n"
         "    tj_wino_at(s[i], o, M);\n"
         "    for (int j = 0; j < cols; ++j) tj_wino_st(y + i*yr + j*yc + c, o[j]);\n  }\n}\n"
         "template <int M>\n"
         "static inline void tj_wino_out(const float* m, int64_t ms, int64_t valid, float* y, int64_t yr, int64_t yc, int rows, int cols) {\n"
         "  const int64_t vn = valid / tj_lanes * tj_lanes;\n"
         "  for (int64_t c = 0; c < vn; c += tj_lanes) tj_wino_out_at<M, tj_vfn>(m, ms, c, y, yr, yc, rows, cols);\n"
         "  for (int64_t c = vn; c < valid; ++c) tj_wino_out_at<M, float>(m, ms, c, y, yr, yc, rows, cols);\n}\n"
         // Channels last, depthwise: one output position, every channel,
         // vectors of channels; w is taps first [KH*KW, C]; x at the window's
         // first tap. The taps [kh0, kh1) x [kw0, kw1) are inside the image
         // (all of them but at its border: FULL).
         "template <int KH, int KW, bool FULL>\n"
         "static inline void tj_dw_cl(const float* x, int64_t xr, int64_t xk, const float* w, int64_t C, float* y, int kh0, int kh1, int kw0, int kw1) {\n"
         "  if constexpr (FULL) kh0 = 0, kh1 = KH, kw0 = 0, kw1 = KW;\n"
         "  const int64_t C64 = C & ~int64_t{63};  // a constant where C is: dead tails fold away\n"
         "  for (int64_t c = 0; c < C64; c += 64) {\n"
         "    tj_vfn acc[4*tj_per16] = {};\n"
         "    for (int kh = kh0; kh < kh1; ++kh)\n#pragma GCC unroll 8\n      for (int kw = kw0; kw < kw1; ++kw) {\n"
         "        const float* xp = x + kh*xr + kw*xk + c;\n        const float* wp = w + (kh*KW + kw)*C + c;\n"
         "        for (int v = 0; v < 4*tj_per16; ++v) acc[v] += *(const tj_vfnu*)(xp + tj_lanes*v) * *(const tj_vfnu*)(wp + tj_lanes*v);\n      }\n"
         "    for (int v = 0; v < 4*tj_per16; ++v) *(tj_vfnu*)(y + c + tj_lanes*v) = acc[v];\n  }\n"
         "  auto vec = [&](int64_t c) {\n"
         "    tj_vfn acc = {};\n"
         "    for (int kh = kh0; kh < kh1; ++kh)\n      for (int kw = kw0; kw < kw1; ++kw)\n"
         "        acc += *(const tj_vfnu*)(x + kh*xr + kw*xk + c) * *(const tj_vfnu*)(w + (kh*KW + kw)*C + c);\n"
         "    *(tj_vfnu*)(y + c) = acc;\n  };\n"
         "  int64_t c = C64;\n"
         "  for (; c + tj_lanes <= C; c += tj_lanes) vec(c);\n"
         // The channels past the last whole vector: one vector moved back
         // to end at C (its other lanes' sums again, the same bits).
         "  if (c < C && C >= tj_lanes) {\n    vec(C - tj_lanes);\n    return;\n  }\n"
         "  for (; c < C; ++c) {\n"
         "    float acc = 0;\n"
         "    for (int kh = kh0; kh < kh1; ++kh)\n      for (int kw = kw0; kw < kw1; ++kw) acc += x[kh*xr + kw*xk + c] * w[(kh*KW + kw)*C + c];\n"
         "    y[c] = acc;\n  }\n}\n"
         // Channels last, grouped, CG inputs and CG outputs per group (2, 4
         // or 8: grouped_channels_last), otherwise as tj_dw_cl: w is
         // [KH*KW, CG, M]; a vector of output channels (tj_lanes/CG groups)
         // sums, per tap and input j of its groups, the input vector with
         // each lane given its group's j-th channel (a shuffle) times the
         // weights' vector. Up to 8 vectors at a time with AVX-512, 6
         // otherwise (their inputs and sums fill 16 registers), each its own
         // chain of sums (one vector at a time was one chain of KH*KW*CG
         // dependent multiply-adds: regnet_y_400mf's 28x28x104 convs ran at
         // a fifth of the machine's rate); a last part vector is moved back
         // to end at M (M - tj_lanes is a multiple of CG: its lanes are whole
         // groups, and the channels it recomputes come out the same). Each
         // channel sums its taps in one order: rows, columns, then j. Groups
         // that do not divide a vector (8 with SSE alone; 12, 24) go one
         // channel at a time (the library takes those by rule).
         "template <int KH, int KW, int CG, int NV>\n"
         "static inline void tj_gc_cl_vecs(const float* x, int64_t xr, int64_t xk, const float* w, int64_t M, float* y, const int64_t* at, int kh0, int kh1,\n"
         "                                 int kw0, int kw1) {\n"
         "  tj_vfn acc[NV] = {};\n"
         "  for (int kh = kh0; kh < kh1; ++kh)\n    for (int kw = kw0; kw < kw1; ++kw) {\n"
         "      const float* xp = x + kh*xr + kw*xk;\n      const float* wp = w + (kh*KW + kw)*CG*M;\n"
         "      tj_vfn xv[NV];\n"
         "      for (int v = 0; v < NV; ++v) xv[v] = *(const tj_vfnu*)(xp + at[v]);  // the groups' inputs: the same channels\n"
         "#pragma GCC unroll 8\n"
         "      for (int j = 0; j < CG; ++j) {\n"
         "        tj_vin sel;\n"
         "        for (int l = 0; l < tj_lanes; ++l) sel[l] = l / CG * CG + j;\n"
         "        for (int v = 0; v < NV; ++v) acc[v] += __builtin_shuffle(xv[v], sel) * *(const tj_vfnu*)(wp + j*M + at[v]);\n"
         "      }\n    }\n"
         "  for (int v = 0; v < NV; ++v) *(tj_vfnu*)(y + at[v]) = acc[v];\n}\n"
         // M's channels as vectors, `most` at a time, then the rest: each
         // call's count a constant, two instantiations for any M (a switch
         // over all eight counts, inlined for each position form, took
         // 1.2-1.3 s of compiling per kernel: regnet_y_400mf's 208- and
         // 440-channel convs, Zen 4).
         "template <int KH, int KW, int CG, int64_t M>\n"
         "static inline void tj_gc_cl_all(const float* x, int64_t xr, int64_t xk, const float* w, float* y, int kh0, int kh1, int kw0, int kw1) {\n"
         "  constexpr int64_t nv = (M + tj_lanes - 1) / tj_lanes;\n"
         "  constexpr int most = tj_per16 == 1 ? 8 : 6, rest = (int)(nv % most);\n"
         "  for (int64_t v0 = 0; v0 + most <= nv; v0 += most) {\n"
         "    int64_t at[most];\n"
         "    for (int v = 0; v < most; ++v) at[v] = std::min<int64_t>((v0 + v)*tj_lanes, M - tj_lanes);\n"
         "    tj_gc_cl_vecs<KH, KW, CG, most>(x, xr, xk, w, M, y, at, kh0, kh1, kw0, kw1);\n"
         "  }\n"
         "  if constexpr (rest > 0) {\n"
         "    int64_t at[rest];\n"
         "    for (int v = 0; v < rest; ++v) at[v] = std::min<int64_t>((nv - rest + v)*tj_lanes, M - tj_lanes);\n"
         "    tj_gc_cl_vecs<KH, KW, CG, rest>(x, xr, xk, w, M, y, at, kh0, kh1, kw0, kw1);\n"
         "  }\n}\n"
         // M, the channels, is the template's (the argument is the same).
         "template <int KH, int KW, int CG, int64_t M, bool FULL>\n"
         "static inline void tj_gc_cl(const float* x, int64_t xr, int64_t xk, const float* w, int64_t, float* y, int kh0, int kh1, int kw0, int kw1) {\n"
         "  if constexpr (FULL) kh0 = 0, kh1 = KH, kw0 = 0, kw1 = KW;\n"
         "  if constexpr (M < tj_lanes || tj_lanes % CG != 0) {\n"
         "    for (int64_t m = 0; m < M; ++m) {\n"
         "      float acc = 0;\n"
         "      for (int kh = kh0; kh < kh1; ++kh)\n        for (int kw = kw0; kw < kw1; ++kw)\n"
         "          for (int j = 0; j < CG; ++j) acc += x[kh*xr + kw*xk + m / CG * CG + j] * w[((kh*KW + kw)*CG + j)*M + m];\n"
         "      y[m] = acc;\n    }\n"
         "  } else {\n"
         "    tj_gc_cl_all<KH, KW, CG, M>(x, xr, xk, w, y, kh0, kh1, kw0, kw1);\n"
         "  }\n}\n"
         // tj_dw_cl and tj_gc_cl for NP positions of a row (SW columns apart,
         // taps DW columns apart; columns xk floats apart in x, positions M in
         // y), the window rows [0, nkh) from x and w (the caller starts both
         // at the first row inside the image), every column inside it; CG
         // inputs and outputs per group, 1 depthwise (w [KH*KW, CG, C]). Per
         // vector of 16 channels, each input vector of a row that the run's
         // windows read is loaded once and serves every position whose
         // window holds it (3x3, stride 1, 8 positions: 10 loads for 24
         // multiply-adds, where each position reading its own taps took 24).
         // Depthwise, the row's KW weight vectors are held; grouped, the
         // input vector is shuffled once per input j of its groups (one
         // shuffle per KW multiply-adds, where one position at a time took
         // one per multiply-add: resnext50's 56x56x128 convs of 4-channel
         // groups ran at 35-44% of the machine's sgemm rate), and the
         // weights are read from L1 as the multiply-adds' operands (KW*CG
         // vectors per window row would not fit in registers). Each position
         // sums its taps in tj_dw_cl's and tj_gc_cl's order: rows, columns,
         // then j (the column's shuffles one at a time, each used by every
         // position it serves, so that one shuffled vector is live: eight
         // were spilled). C < 16 channels, and groups that do not divide a
         // vector, go one channel at a time; a last part vector is moved
         // back to end at C (it recomputes a few channels, alike). At the
         // image's border, the run's first L and last R columns lie outside
         // it (x is at its first column inside): their taps are left out, as
         // zeros would add nothing (the border positions in runs of their
         // own, where one at a time each read a weight vector per
         // multiply-add). EP: the register epilogue of tj_conv_tile_cl
         // (bias, then ReLU or a clip by constants), applied before the store.
         "template <int KW, int CG, int SW, int DW, int NP, int L = 0, int R = 0, int EP = 0>\n"
         "static inline void tj_cl_run(const float* x, int64_t xr, int64_t xk, const float* w, int64_t C, float* y, int64_t M, int nkh,\n"
         "                             const float* bias = nullptr, float lo = 0, float hi = 0) {\n"
         "  constexpr int J = (NP - 1)*SW + (KW - 1)*DW + 1;\n"
         "  constexpr bool vectors = tj_lanes % CG == 0;\n"
         "  for (int64_t c0 = 0; vectors && c0 < C && C >= 16; c0 += 16) {\n"
         "    for (int64_t c = (c0 + 16 <= C ? c0 : C - 16), cu = c; cu < c + 16; cu += tj_lanes) {\n"
         "    tj_vfn acc[NP] = {};\n"
         "    for (int kh = 0; kh < nkh; ++kh) {\n"
         "      const float* xp = x + kh*xr + cu;\n      const float* wp = w + kh*KW*CG*C + cu;\n"
         "      tj_vfn wv[CG == 1 ? KW : 1];\n"
         "#pragma GCC unroll 16\n"
         "      for (int kw = 0; CG == 1 && kw < KW; ++kw) wv[kw] = *(const tj_vfnu*)(wp + kw*C);\n"
         "#pragma GCC unroll 64\n"
         "      for (int j = L; j < J - R; ++j) {\n"
         "        const tj_vfn xv = *(const tj_vfnu*)(xp + (j - L)*xk);\n"
         "#pragma GCC unroll 8\n"
         "        for (int g = 0; g < CG; ++g) {\n"
         "          tj_vfn xs = xv;\n"
         "          if constexpr (CG > 1) {\n"
         "            tj_vin sel;\n"
         "            for (int l = 0; l < tj_lanes; ++l) sel[l] = l / CG * CG + g;\n"
         "            xs = __builtin_shuffle(xv, sel);\n          }\n"
         "#pragma GCC unroll 16\n"
         "          for (int p = 0; p < NP; ++p) {\n"
         "            const int t = j - SW*p;\n"
         "            if (t < 0 || t % DW != 0 || t / DW >= KW) continue;\n"
         "            if constexpr (CG == 1) acc[p] += xs * wv[t / DW];\n"
         "            else acc[p] += xs * *(const tj_vfnu*)(wp + (t / DW * CG + g)*C);\n"
         "          }\n        }\n      }\n    }\n"
         "    for (int p = 0; p < NP; ++p) {\n"
         "      tj_vfn s = acc[p];\n"
         "      if constexpr ((EP & 1) != 0) s = s + *(const tj_vfnu*)(bias + cu);\n"
         "      *(tj_vfnu*)(y + p*M + cu) = tj_conv_act<EP>(s, lo, hi);\n    }\n  }\n  }\n"
         "  if (vectors && C >= 16) return;\n"
         "  for (int p = 0; p < NP; ++p)\n"
         "    for (int64_t c = 0; c < C; ++c) {\n"
         "      float acc = 0;\n"
         "      for (int kh = 0; kh < nkh; ++kh)\n        for (int kw = 0; kw < KW; ++kw)\n"
         "          if (const int j = p*SW + kw*DW; j >= L && j < J - R)\n"
         "            for (int g = 0; g < CG; ++g) acc += x[kh*xr + (j - L)*xk + c / CG * CG + g] * w[((kh*KW + kw)*CG + g)*C + c];\n"
         "      if constexpr ((EP & 1) != 0) acc = acc + bias[c];\n"
         "      y[p*M + c] = tj_conv_act<EP>(acc, lo, hi);\n    }\n}\n\n";
}

}  // namespace tj::cpp
