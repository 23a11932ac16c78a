// The C++ emitter's convolution kernels (KernelKind::conv; the op's row is
// ir/ops/conv.cpp), over the plain layout [N, C, d..] (channels last:
// conv_channels_last.cpp; what both share: conv_common.h). Work is split into
// parts by sizes alone (never by the thread count, so results do not
// depend on it); each part computes its block of the output and then runs
// the epilogue (bias and the fused pointwise ops) over that block while it
// is in cache.
//
//   direct     one group, at most 2 spatial dims, weights packed 16 output
//              channels side by side (pack_conv_weights): per part (image,
//              32 output channels, block of output rows), each run of up
//              to 12 output positions of a row (equal runs, the last one
//              ending at the row's end) held in up to 24 vector registers
//              (12 positions x 32 channels) while every input channel and kernel
//              offset adds a broadcast input times a weight vector
//              (tj_conv_tile, a template on the geometry); the input is
//              first copied into scratch with its zero padding, so the
//              inner loop has no borders.
//   rows       the direct form with few input channels times taps (a
//              stem's 3 channels) and rows of at least 16: tiles of 8
//              output channels by up to 48 positions of an output row
//              (tj_conv_row_tile), stride 2 as even lanes of two vectors,
//              stored as whole vectors.
//   1x1 over   the direct form's 1x1, stride-1 case with at least 64
//   positions  positions: tiles of 8 output channels by 48 positions, a
//              weight broadcast times 3 vectors of x per input channel,
//              stored as whole vectors (tj_conv1x1_tile).
//   depthwise  one input channel per output channel, at most 2 spatial
//              dims: a part per (image, channels of about 4096 outputs). In
//              f32 with stride 1 or 2, each output row as vectors with every
//              tap in registers (tj_dw_row) over the channel's padded plane;
//              otherwise each output row sums its taps as whole vector rows,
//              borders skipped.
//   1x1        stride 1, no padding: a GEMM per (image, group) straight
//              from the input, weights [M/g, C/g] by columns [C/g, P].
//   windows    otherwise: per part, the windows of a block of output rows
//              as columns in per-thread scratch (zeros in the padding), then
//              a GEMM of the group's weights by them. A product with few
//              output positions (late layers) also splits its channels.
#include "codegen/cpp/emitter.h"

#include <algorithm>

#include "codegen/cpp/kernels/conv_common.h"
#include "ir/layout.h"
#include "tensorjit/error.h"

namespace tj::cpp {

using namespace conv_kernels;

// Operand x in place when its layout is contiguous, else copied into its
// temporary first (appended to `code`): its data pointer.
std::string Emitter::dense_operand(ValueId x, std::string* code) {
  auto st = strided(x);
  if (!st || st->strides != contiguous_strides(shape(x))) {
    make_temp_copy(x, code);
    st = Strided{x, 0, contiguous_strides(shape(x))};
  }
  return "(" + ptr(st->base) + " + " + C(st->offset) + ")";
}

// The register tile of the direct form: NP output positions of a row by NV
// vectors of 16 output channels, summed over C input channels and the
// kernel's offsets, then stored into the output's channel rows (those below
// `valid` channels of the tile).
std::string Emitter::direct_conv_helpers() {
  return "typedef int tj_vi16 __attribute__((vector_size(64)));\n"
         "template <int NP, int NV, int KH, int KW, int SW, int DH, int DW>\n"
         "static inline void tj_conv_tile(const float* x, int64_t xc, int64_t xr, const float* w, int64_t wb, int64_t C, float* y,\n"
         "                                int64_t yc, int64_t valid) {\n"
         "  tj_vf16 acc[NP][NV];\n"
         "  for (int p = 0; p < NP; ++p)\n    for (int v = 0; v < NV; ++v) acc[p][v] = tj_vf16{};\n"
         "  for (int64_t c = 0; c < C; ++c) {\n"
         "    const float* xcp = x + c*xc;\n    const float* wc = w + c*(KH*KW*16);\n"
         "    for (int kh = 0; kh < KH; ++kh) {\n"
         "#pragma GCC unroll 8\n"
         "      for (int kw = 0; kw < KW; ++kw) {\n"
         "        tj_vf16 wv[NV];\n"
         "        for (int v = 0; v < NV; ++v) wv[v] = *(const tj_vf16u*)(wc + v*wb + (kh*KW + kw)*16);\n"
         "        const float* xp = xcp + kh*DH*xr + kw*DW;\n"
         "#pragma GCC unroll 24\n"
         "        for (int p = 0; p < NP; ++p) {\n"
         "          const float xs = xp[p*SW];\n"
         "          for (int v = 0; v < NV; ++v) acc[p][v] += xs*wv[v];\n"
         "        }\n      }\n    }\n  }\n"
         "  for (int v = 0; v < NV; ++v)\n    for (int l = 0; l < 16; ++l) {\n"
         "      if (v*16 + l >= valid) return;\n"
         "      float* yl = y + (v*16 + l)*yc;\n"
         "      for (int p = 0; p < NP; ++p) yl[p] = acc[p][v][l];\n    }\n}\n\n"
         // 1x1, stride 1: MT output channels (within one packed block of 16: w
         // is its first channel's weight of input channel 0, the next at +16)
         // by NPV vectors of 16 positions.
         "template <int MT, int NPV>\n"
         "static inline void tj_conv1x1_tile(const float* x, int64_t xc, const float* w, int64_t C, float* y, int64_t yc) {\n"
         "  tj_vf16 acc[MT][NPV];\n"
         "  for (int m = 0; m < MT; ++m)\n    for (int v = 0; v < NPV; ++v) acc[m][v] = tj_vf16{};\n"
         "  for (int64_t c = 0; c < C; ++c) {\n"
         "    tj_vf16 xv[NPV];\n"
         "    for (int v = 0; v < NPV; ++v) xv[v] = *(const tj_vf16u*)(x + c*xc + 16*v);\n"
         "    for (int m = 0; m < MT; ++m) {\n      const float wm = w[c*16 + m];\n"
         "      for (int v = 0; v < NPV; ++v) acc[m][v] += wm*xv[v];\n    }\n  }\n"
         "  for (int m = 0; m < MT; ++m)\n    for (int v = 0; v < NPV; ++v) *(tj_vf16u*)(y + m*yc + 16*v) = acc[m][v];\n}\n"
         // KxK over positions: MT output channels (within one packed block, w
         // at the first one's weight of input channel 0) by NPV vectors of 16
         // positions of an output row; x at the row's first window in the
         // padded plane. Stride 2 takes the even lanes of two vectors. Lanes
         // past n are computed from the plane's slack and not stored.
         "template <int MT, int NPV, int KH, int KW, int SW, int DH, int DW>\n"
         "static inline void tj_conv_row_tile(const float* x, int64_t xc, int64_t xr, const float* w, int64_t C, float* y, int64_t yc, int64_t n) {\n"
         "  tj_vf16 acc[MT][NPV];\n"
         "  for (int m = 0; m < MT; ++m)\n    for (int v = 0; v < NPV; ++v) acc[m][v] = tj_vf16{};\n"
         "  for (int64_t c = 0; c < C; ++c)\n    for (int kh = 0; kh < KH; ++kh)\n"
         "#pragma GCC unroll 8\n"
         "      for (int kw = 0; kw < KW; ++kw) {\n"
         "        const float* xp = x + c*xc + kh*DH*xr + kw*DW;\n"
         "        const float* wk = w + ((c*KH + kh)*KW + kw)*16;\n"
         "        tj_vf16 xv[NPV];\n"
         "        for (int v = 0; v < NPV; ++v) {\n"
         "          if constexpr (SW == 1) xv[v] = *(const tj_vf16u*)(xp + 16*v);\n"
         "          else xv[v] = __builtin_shuffle(*(const tj_vf16u*)(xp + 32*v), *(const tj_vf16u*)(xp + 32*v + 16),\n"
         "                                         tj_vi16{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30});\n"
         "        }\n"
         "        for (int m = 0; m < MT; ++m) {\n          const float wm = wk[m];\n"
         "          for (int v = 0; v < NPV; ++v) acc[m][v] += wm*xv[v];\n        }\n      }\n"
         "  for (int m = 0; m < MT; ++m) {\n"
         "    for (int v = 0; v + 1 < NPV; ++v) *(tj_vf16u*)(y + m*yc + 16*v) = acc[m][v];\n"
         "    if (n == 16*NPV) *(tj_vf16u*)(y + m*yc + 16*(NPV - 1)) = acc[m][NPV - 1];\n"
         "    else for (int64_t l = 0; l < n - 16*(NPV - 1); ++l) y[m*yc + 16*(NPV - 1) + l] = acc[m][NPV - 1][l];\n"
         "  }\n}\n"
         // The same for n < 48 positions.
         "template <int MT>\n"
         "static inline void tj_conv1x1_rest(const float* x, int64_t xc, const float* w, int64_t C, float* y, int64_t yc, int64_t n) {\n"
         "  float acc[MT][48] = {};\n"
         "  for (int64_t c = 0; c < C; ++c)\n    for (int m = 0; m < MT; ++m) {\n      const float wm = w[c*16 + m];\n"
         "#pragma omp simd\n      for (int64_t p = 0; p < n; ++p) acc[m][p] += wm*x[c*xc + p];\n    }\n"
         "  for (int m = 0; m < MT; ++m)\n    for (int64_t p = 0; p < n; ++p) y[m*yc + p] = acc[m][p];\n}\n"
         // A depthwise output row of n <= 16 NV positions: NV vectors, every
         // tap of the kernel (in order) in registers; stride 2 takes the even
         // lanes of two vectors.
         "template <int NV, int KH, int KW, int SW, int DH, int DW>\n"
         "static inline void tj_dw_row(const float* x, int64_t xr, const float* w, float* y, int64_t n) {\n"
         "  tj_vf16 acc[NV];\n  for (int v = 0; v < NV; ++v) acc[v] = tj_vf16{};\n"
         "  for (int kh = 0; kh < KH; ++kh)\n#pragma GCC unroll 8\n    for (int kw = 0; kw < KW; ++kw) {\n"
         "      const float wv = w[kh*KW + kw];\n      const float* xp = x + kh*DH*xr + kw*DW;\n"
         "      for (int v = 0; v < NV; ++v) {\n"
         "        tj_vf16 xv;\n"
         "        if constexpr (SW == 1) xv = *(const tj_vf16u*)(xp + 16*v);\n"
         "        else xv = __builtin_shuffle(*(const tj_vf16u*)(xp + 32*v), *(const tj_vf16u*)(xp + 32*v + 16),\n"
         "                                    tj_vi16{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30});\n"
         "        acc[v] += wv*xv;\n      }\n    }\n"
         "  for (int v = 0; v + 1 < NV; ++v) *(tj_vf16u*)(y + 16*v) = acc[v];\n"
         "  for (int64_t l = 0; l < n - 16*(NV - 1); ++l) y[16*(NV - 1) + l] = acc[NV - 1][l];\n}\n"
         + channels_last_conv_helpers();
}

std::string Emitter::conv_body(const Kernel& K) {
  const ValueId cv = K.ops[0];
  const Node& n = g_.node(cv);
  if (n.attr_bool("channels_last")) return conv_channels_last_body(K);
  const std::string ty = T(cv);
  if (ty != "float" && ty != "double") throw Error("code generation: conv of " + ty + " (the driver lowers it to windows)");
  const auto sx = shape(n.inputs[0]), sw = shape(n.inputs[1]), so = shape(cv);
  const size_t k = sw.size() - 2;
  const auto& stride = n.attr_ints("stride");
  const auto& dil = n.attr_ints("dilation");
  const auto& pad = n.attr_ints("pad_begin");
  const int64_t G = n.attr_int("groups"), C_ = sx[1].value(), M = sw[0].value(), Cg = C_ / G, Mg = M / G;
  std::vector<int64_t> in, ker, out;
  for (size_t i = 0; i < k; ++i) in.push_back(sx[i + 2].value()), ker.push_back(sw[i + 2].value()), out.push_back(so[i + 2].value());
  int64_t taps = 1, P = 1, Sz = 1;
  for (size_t i = 0; i < k; ++i) taps *= ker[i], P *= out[i], Sz *= in[i];
  const int64_t OW = out.back(), W = in.back(), R = P / OW, Kc = Cg * taps;
  std::string code;
  const ValueId packed = G == 1 && k <= 2 && ty == "float" ? packed_conv_blocks(g_, n.inputs[1]) : -1;
  const std::string X = dense_operand(n.inputs[0], &code), Wt = packed >= 0 ? "" : dense_operand(n.inputs[1], &code);
  const std::string B = n.inputs.size() > 2 ? dense_operand(n.inputs[2], &code) : "";
  const std::string Nn = C(so[0]), Y = ptr(cv);
  const bool epilogue = !B.empty() || K.ops.size() > 1;
  // The epilogue over output channels mc in [m0, m1) of group g, output
  // rows [r0, r1) of image b: the bias, then the kernel's pointwise ops.
  auto epilogue_over = [&](const std::string& m0, const std::string& m1, const std::string& r0, const std::string& r1) {
    if (!epilogue) return std::string();
    Idx iv{"b", "mc"};
    std::string open = "      for (int64_t mc = " + m0 + "; mc < " + m1 + "; ++mc)\n        for (int64_t r = " + r0 + "; r < " + r1 + "; ++r) {\n";
    // Outer spatial indices from r (row-major over all but the last dim).
    for (size_t i = 0; i + 1 < k; ++i) {
      int64_t below = 1;
      for (size_t j = i + 1; j + 1 < k; ++j) below *= out[j];
      open += "          const int64_t o" + S(static_cast<int64_t>(i)) + " = r / " + S(below) + " % " + S(out[i]) + ";\n";
      iv.push_back("o" + S(static_cast<int64_t>(i)));
    }
    iv.push_back("ow");
    open += "#pragma omp simd\n          for (int64_t ow = 0; ow < " + S(OW) + "; ++ow) {\n";
    local_.clear();
    std::string body;
    const std::string at = "((b*" + S(M) + " + mc)*" + S(P) + " + r*" + S(OW) + " + ow)";
    if (!B.empty()) {
      body += "            const " + CT(cv) + " v" + S(cv) + " = " + Y + "[" + at + "] + " + B + "[mc];\n";
      if (K.writes(cv)) body += "            " + Y + "[" + at + "] = v" + S(cv) + ";\n";
      local_[cv] = "v" + S(cv);
    }
    body += pointwise_statements(K, 1, iv, so, "            ");
    local_.clear();
    return open + body + "          }\n        }\n";
  };

  // 1x1, stride 1, no padding: the positions of x and y are alike.
  const bool pointwise_1x1 = taps == 1 && std::all_of(stride.begin(), stride.end(), [](int64_t s) { return s == 1; }) &&
                             std::all_of(pad.begin(), pad.end(), [](int64_t p) { return p == 0; }) &&
                             n.attr_ints("pad_end") == std::vector<int64_t>(k, 0);
  if (packed >= 0) {
    uses_direct_conv_ = true;
    const Plane pl(in, ker, out, stride, pad, dil);  // the input padded to [C, Hp, Wp]
    const int64_t pairs = (M + 31) / 32, RB = std::max<int64_t>(1, std::min<int64_t>(pl.OH, (kDirectPositions + OW - 1) / OW)),
                  RBs = (pl.OH + RB - 1) / RB;
    const std::string Wp_ = ptr(packed), wb = S(C_ * pl.KH * pl.KW * 16);
    std::string xin = X, xc = S(Sz), xr = S(W);
    if (pointwise_1x1 && P >= kFlatPositions) {
      // Vectors over positions, 8 output channels by 48 positions a tile:
      // each input channel adds a weight broadcast times 3 vectors of x,
      // and the tile is stored as whole vectors of the channels' rows.
      code += "  " + open_parallel(Nn + "*" + S(pairs * RBs));
      code += "    const int64_t b = tj_part / " + S(pairs * RBs) + ", q = tj_part % " + S(pairs * RBs) + ";\n";
      code += "    const int64_t m0 = q / " + S(RBs) + " * 32, m1 = std::min<int64_t>(" + S(M) + ", m0 + 32);\n";
      code += "    const int64_t r0 = q % " + S(RBs) + " * " + S(RB) + ", r1 = std::min<int64_t>(" + S(R) + ", r0 + " + S(RB) + ");\n";
      code += "    const int64_t pend = r1*" + S(OW) + ";\n";  // (p<digits> names values' buffers)
      code += "    const float* xb = " + X + " + b*" + S(C_ * P) + ";\n    float* yb = " + Y + " + b*" + S(M * P) + ";\n";
      code += "    for (int64_t p = r0*" + S(OW) + "; p < pend; ) {\n";
      code += "      const int64_t n = std::min<int64_t>(pend - p, 48);\n";
      code += "      int64_t m = m0;\n";
      code += "      for (; m + 8 <= m1; m += 8) {\n";
      code += "        const float* w = " + Wp_ + " + (m/16)*" + S(C_ * 16) + " + m%16;\n";
      code += "        if (n == 48) tj_conv1x1_tile<8, 3>(xb + p, " + S(P) + ", w, " + S(C_) + ", yb + m*" + S(P) + " + p, " + S(P) + ");\n";
      code += "        else tj_conv1x1_rest<8>(xb + p, " + S(P) + ", w, " + S(C_) + ", yb + m*" + S(P) + " + p, " + S(P) + ", n);\n      }\n";
      if (M % 8)
        code += "      if (m < m1) tj_conv1x1_rest<" + S(M % 8) + ">(xb + p, " + S(P) + ", " + Wp_ + " + (m/16)*" + S(C_ * 16) + " + m%16, " + S(C_) + ", yb + m*" +
                S(P) + " + p, " + S(P) + ", n);\n";
      code += "      p += n;\n    }\n";
      if (epilogue) code += "    {\n" + epilogue_over("m0", "m1", "r0", "r1") + "    }\n";
      code += close_parallel();
      return code;
    }
    // Few input channels times taps (stems: 3 channels): the channel tile
    // below would spend more on its transposed stores than on its sums, so
    // rows of at least a vector take vectors over positions instead.
    const bool row_form = C_ * taps < kRowFormTaps && OW >= 16 && (pl.SW == 1 || pl.SW == 2);
    code += "  for (int64_t b = 0; b < " + Nn + "; ++b) {\n";
    if (pl.padded() || row_form) {
      // The image with its zero padding, in the first thread's scratch
      // (shared by the parts); the row form reads up to kRowSlack floats
      // past the last plane's end, into lanes it does not store.
      const int64_t planes = C_ * pl.Hp * pl.Wp, slack = row_form ? kRowSlack : 0;
      scratch(Dim(0));
      out_.scratch_sizes.back() = Dim((planes + slack) * 4);
      code += "    float* xpad = (float*)" + slot(tj_slot_scratch) + ";\n";
      if (slack) code += "    for (int64_t i = " + S(planes) + "; i < " + S(planes + slack) + "; ++i) xpad[i] = 0;\n";
      code += "    " + open_parallel(S(C_));
      code += "      const float* src = " + X + " + (b*" + S(C_) + " + tj_part)*" + S(Sz) + ";\n      float* dst = xpad + tj_part*" + S(pl.Hp * pl.Wp) + ";\n";
      code += pl.copy("dst", "src", "      ");
      code += "    " + close_parallel();
      xin = "xpad", xc = S(pl.Hp * pl.Wp), xr = S(pl.Wp);
    } else {
      xin = "(" + X + " + b*" + S(C_ * Sz) + ")";
    }
    if (row_form) {
      // Parts over (32 output channels, block of output rows); in each, tiles
      // of 8 channels by up to 48 positions of a row (tj_conv_row_tile).
      const int64_t npv = std::min<int64_t>(3, (OW + 15) / 16), np = 16 * npv, full = OW / np * np, tail = OW - full;
      const std::string geo = S(pl.KH) + ", " + S(pl.KW) + ", " + S(pl.SW) + ", " + S(pl.DH) + ", " + S(pl.DW) + ">";
      auto tile = [&](int64_t mt, int64_t nv, const std::string& m, const std::string& ow, const std::string& n) {
        return "tj_conv_row_tile<" + S(mt) + ", " + S(nv) + ", " + geo + "(xrow + " + ow + "*" + S(pl.SW) + ", " + xc + ", " + xr + ", " + Wp_ + " + (" + m +
               "/16)*" + wb + " + " + m + "%16, " + S(C_) + ", yb + " + m + "*" + S(P) + " + oh*" + S(OW) + " + " + ow + ", " + S(P) + ", " + n + ");\n";
      };
      auto channels = [&](int64_t nv, const std::string& ow, const std::string& n, const std::string& at) {
        std::string t = at + "{\n" + at + "  int64_t m = m0;\n" + at + "  for (; m + 8 <= m1; m += 8) " + tile(8, nv, "m", ow, n);
        if (M % 8) t += at + "  if (m < m1) " + tile(M % 8, nv, "m", ow, n);
        return t + at + "}\n";
      };
      code += "    " + open_parallel(S(pairs * RBs));
      code += "      const int64_t m0 = tj_part / " + S(RBs) + " * 32, m1 = std::min<int64_t>(" + S(M) + ", m0 + 32);\n";
      code += "      const int64_t r0 = tj_part % " + S(RBs) + " * " + S(RB) + ", r1 = std::min<int64_t>(" + S(pl.OH) + ", r0 + " + S(RB) + ");\n";
      code += "      float* yb = " + Y + " + b*" + S(M * P) + ";\n";
      code += "      for (int64_t oh = r0; oh < r1; ++oh) {\n";
      code += "        const float* xrow = " + xin + " + oh*" + S(pl.SH) + "*" + xr + ";\n";
      if (full > 0) code += "        for (int64_t ow = 0; ow < " + S(full) + "; ow += " + S(np) + ")\n" + channels(npv, "ow", S(np), "        ");
      if (tail > 0) code += channels((tail + 15) / 16, S(full), S(tail), "        ");
      code += "      }\n";
      if (epilogue) code += "      {\n" + epilogue_over("m0", "m1", "r0", "r1") + "      }\n";
      code += "    " + close_parallel() + "  }\n";
      return code;
    }
    code += "    " + open_parallel(S(pairs * RBs));
    code += "      const int64_t pr = tj_part / " + S(RBs) + ", r0 = tj_part % " + S(RBs) + " * " + S(RB) + ", r1 = std::min<int64_t>(" + S(pl.OH) +
            ", r0 + " + S(RB) + ");\n";
    code += "      const int64_t m0 = pr*32, valid = std::min<int64_t>(32, " + S(M) + " - m0);\n";
    code += "      const float* wp = " + Wp_ + " + pr*2*" + wb + ";\n";
    code += "      float* yb = " + Y + " + (b*" + S(M) + " + m0)*" + S(P) + ";\n";
    code += "      for (int64_t oh = r0; oh < r1; ++oh) {\n";
    code += "        const float* xrow = " + xin + " + oh*" + S(pl.SH) + "*" + xr + ";\n";
    // A row in tiles of equal width np (at most kTilePositions with 2
    // vectors of channels, twice that with 1), the last one ending at the
    // row's end: it may overlap the one before, whose positions it computes
    // again, alike. One instantiation of the tile per geometry and width.
    auto tiles = [&](int nv) {
      const auto [count, np] = row_tiles(OW, nv == 2 ? kTilePositions : 2 * kTilePositions);
      const std::string geo = std::to_string(nv) + ", " + S(pl.KH) + ", " + S(pl.KW) + ", " + S(pl.SW) + ", " + S(pl.DH) + ", " + S(pl.DW) + ">";
      return "          for (int64_t i = 0; i < " + S(count) + "; ++i) {\n            const int64_t ow = std::min<int64_t>(i*" + S(np) + ", " + S(OW - np) +
             ");\n            tj_conv_tile<" + S(np) + ", " + geo + "(xrow + ow*" + S(pl.SW) + ", " + xc + ", " + xr + ", wp, " + wb + ", " + S(C_) +
             ", yb + oh*" + S(OW) + " + ow, " + S(P) + ", valid);\n          }\n";
    };
    code += by_channel_vectors(M, tiles, "        ") + "      }\n";
    if (epilogue) code += "      {\n" + epilogue_over("m0", "m0 + valid", "r0", "r1") + "      }\n";
    code += "    " + close_parallel() + "  }\n";
    return code;
  }

  const bool depthwise = Cg == 1 && Mg == 1 && k <= 2;
  if (depthwise) {
    const Plane pl(in, ker, out, stride, pad, dil);
    const int64_t H = pl.H, OH = pl.OH, KH = pl.KH, KW = pl.KW, SH = pl.SH, PH = pl.PH, DH = pl.DH, SW = pl.SW, PW = pl.PW, DW = pl.DW;
    // Channels per part: about kDepthwiseOutputs outputs each (a part per
    // small plane would cost more to hand out than to compute).
    const int64_t per = std::max<int64_t>(1, std::min<int64_t>(C_, kDepthwiseOutputs / std::max<int64_t>(P, 1))), blocks = (C_ + per - 1) / per;
    code += "  {\n" + open_parallel(Nn + "*" + S(blocks));
    code += "    const int64_t b = tj_part / " + S(blocks) + ", c0 = tj_part % " + S(blocks) + " * " + S(per) + ", c1 = std::min<int64_t>(" + S(C_) +
            ", c0 + " + S(per) + ");\n";
    const int64_t NV = (OW + 15) / 16;
    if (ty == "float" && (SW == 1 || SW == 2) && NV <= 8) {
      // Vector rows: each output row NV vectors of 16 positions, every tap
      // summed in registers (tj_dw_row), over the channel's plane copied
      // with its zero padding into this thread's scratch (row pitch Wq;
      // the slack after it is read by lanes past the row, never stored).
      uses_direct_conv_ = true;
      const int64_t Wq = pl.Wp, plane = pl.Hp * Wq + 32 * NV * SW + KW * DW + 32;
      const std::string stride_ = scratch(Dim(plane * 4));
      code += "    float* pad = (float*)((char*)" + slot(tj_slot_scratch) + " + tj_thread*" + stride_ + ");\n";
      code += "    for (int64_t i = 0; i < " + S(plane) + "; ++i) pad[i] = 0;\n";
      code += "    for (int64_t c = c0; c < c1; ++c) {\n";
      code += "      const float* src = " + X + " + (b*" + S(C_) + " + c)*" + S(Sz) + ";\n";
      code += pl.copy("pad", "src", "      ", false);
      code += "      const float* wc = " + Wt + " + c*" + S(taps) + ";\n      float* yp = " + Y + " + (b*" + S(M) + " + c)*" + S(P) + ";\n";
      code += "      for (int64_t oh = 0; oh < " + S(OH) + "; ++oh) tj_dw_row<" + S(NV) + ", " + S(KH) + ", " + S(KW) + ", " + S(SW) + ", " + S(DH) + ", " +
              S(DW) + ">(pad + oh*" + S(SH * Wq) + ", " + S(Wq) + ", wc, yp + oh*" + S(OW) + ", " + S(OW) + ");\n";
      code += "    }\n";
      if (epilogue) code += "    {\n" + epilogue_over("c0", "c1", "0", S(R)) + "    }\n";
      code += close_parallel() + "  }\n";
      return code;
    }
    code += "    for (int64_t c = c0; c < c1; ++c) {\n";
    code += "    const " + ty + "* xp = " + X + " + (b*" + S(C_) + " + c)*" + S(Sz) + ";\n";
    code += "    const " + ty + "* wp = " + Wt + " + c*" + S(taps) + ";\n";
    code += "    " + ty + "* yp = " + Y + " + (b*" + S(M) + " + c)*" + S(P) + ";\n";
    code += "    for (int64_t oh = 0; oh < " + S(OH) + "; ++oh) {\n      " + ty + "* yr = yp + oh*" + S(OW) + ";\n";
    code += "      for (int64_t ow = 0; ow < " + S(OW) + "; ++ow) yr[ow] = 0;\n";
    code += "      for (int64_t kh = 0; kh < " + S(KH) + "; ++kh) {\n";
    code += "        const int64_t ih = oh*" + S(SH) + " - " + S(PH) + " + kh*" + S(DH) + ";\n";
    code += "        if (ih < 0 || ih >= " + S(H) + ") continue;\n        const " + ty + "* xr = xp + ih*" + S(W) + ";\n";
    code += "        for (int64_t kw = 0; kw < " + S(KW) + "; ++kw) {\n          const " + ty + " wv = wp[kh*" + S(KW) + " + kw];\n";
    code += "          const int64_t a = " + S(PW) + " - kw*" + S(DW) + ", e = " + S(W - 1 + PW) + " - kw*" + S(DW) + ";\n";
    code += "          const int64_t lo = a <= 0 ? 0 : (a + " + S(SW - 1) + ")/" + S(SW) + ", hi = e < 0 ? 0 : std::min<int64_t>(" + S(OW) +
            ", e/" + S(SW) + " + 1);\n";
    code += "          const " + ty + "* xs = xr - a;\n#pragma omp simd\n";
    code += "          for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv*xs[ow*" + S(SW) + "];\n        }\n      }\n    }\n";
    code += "    }\n";
    if (epilogue) code += "    {\n" + epilogue_over("c0", "c1", "0", S(R)) + "    }\n";
    code += close_parallel() + "  }\n";
    return code;
  }

  // The GEMM forms: parts over (image, group, block of output rows, block of channels).
  const int64_t RB = std::max<int64_t>(1, std::min<int64_t>(R, (kConvColumns + OW - 1) / OW)), PB = (R + RB - 1) / RB;
  const int64_t others = hint(so[0]) * G * PB;
  int64_t MBS = Mg;
  if (others < kConvParts && Mg >= 2 * kConvChannelBlock)
    MBS = std::max<int64_t>(kConvChannelBlock, (Mg * others / kConvParts + kConvChannelBlock - 1) / kConvChannelBlock * kConvChannelBlock);
  const int64_t MB = (Mg + MBS - 1) / MBS;
  code += "  {\n" + open_parallel(Nn + "*" + S(G * PB * MB));
  code += "    int64_t q = tj_part;\n    const int64_t mb = q % " + S(MB) + "; q /= " + S(MB) + ";\n    const int64_t pb = q % " + S(PB) + "; q /= " +
          S(PB) + ";\n    const int64_t g = q % " + S(G) + ", b = q / " + S(G) + ";\n";
  code += "    const int64_t r0 = pb*" + S(RB) + ", r1 = std::min<int64_t>(" + S(R) + ", r0 + " + S(RB) + "), cols = (r1 - r0)*" + S(OW) + ";\n";
  code += "    const int64_t m0 = mb*" + S(MBS) + ", m1 = std::min<int64_t>(" + S(Mg) + ", m0 + " + S(MBS) + ");\n";
  code += "    const " + ty + "* xg = " + X + " + (b*" + S(C_) + " + g*" + S(Cg) + ")*" + S(Sz) + ";\n";
  std::string cols_ptr, ldb;
  if (pointwise_1x1) {
    cols_ptr = "xg + r0*" + S(OW);
    ldb = S(P);
  } else {
    const std::string per = scratch(Dim(Kc * RB * OW * static_cast<int64_t>(dtype_size(g_.type(cv).dtype))));
    code += "    " + ty + "* col = (" + ty + "*)((char*)" + slot(tj_slot_scratch) + " + tj_thread*" + per + ");\n";
    // Row (c, t0.., t{k-1}) of the columns: the input under kernel offset t
    // at each output position of rows [r0, r1).
    code += "    for (int64_t c = 0; c < " + S(Cg) + "; ++c) {\n      const " + ty + "* xc = xg + c*" + S(Sz) + ";\n";
    std::string tap = "0";
    for (size_t i = 0; i < k; ++i) {
      code += "      for (int64_t t" + S(static_cast<int64_t>(i)) + " = 0; t" + S(static_cast<int64_t>(i)) + " < " + S(ker[i]) + "; ++t" +
              S(static_cast<int64_t>(i)) + ")\n";
      tap = "(" + tap + ")*" + S(ker[i]) + " + t" + S(static_cast<int64_t>(i));
    }
    code += "      {\n        " + ty + "* dst = col + (c*" + S(taps) + " + " + tap + ")*cols;\n";
    const std::string tl = "t" + S(static_cast<int64_t>(k - 1));
    code += "        const int64_t a = " + S(pad.back()) + " - " + tl + "*" + S(dil.back()) + ", e = " + S(W - 1 + pad.back()) + " - " + tl + "*" +
            S(dil.back()) + ";\n";
    code += "        const int64_t lo = a <= 0 ? 0 : std::min<int64_t>(" + S(OW) + ", (a + " + S(stride.back() - 1) + ")/" + S(stride.back()) +
            "), hi = e < 0 ? 0 : std::max<int64_t>(lo, std::min<int64_t>(" + S(OW) + ", e/" + S(stride.back()) + " + 1));\n";
    code += "        for (int64_t r = r0; r < r1; ++r) {\n          " + ty + "* d = dst + (r - r0)*" + S(OW) + ";\n";
    code += "          int64_t at = 0;\n          bool inside = true;\n";
    for (size_t i = 0; i + 1 < k; ++i) {
      int64_t below = 1;
      for (size_t j = i + 1; j + 1 < k; ++j) below *= out[j];
      const std::string ii = S(static_cast<int64_t>(i));
      code += "          {\n            const int64_t q_ = (r / " + S(below) + " % " + S(out[i]) + ")*" + S(stride[i]) + " - " + S(pad[i]) + " + t" + ii +
              "*" + S(dil[i]) + ";\n";
      code += "            inside = inside && q_ >= 0 && q_ < " + S(in[i]) + ";\n            at = at*" + S(in[i]) + " + q_;\n          }\n";
    }
    code += "          if (!inside) {\n            for (int64_t ow = 0; ow < " + S(OW) + "; ++ow) d[ow] = 0;\n            continue;\n          }\n";
    code += "          const " + ty + "* xs = xc + at*" + S(W) + " - a;\n";
    code += "          for (int64_t ow = 0; ow < lo; ++ow) d[ow] = 0;\n#pragma omp simd\n";
    code += "          for (int64_t ow = lo; ow < hi; ++ow) d[ow] = xs[ow*" + S(stride.back()) + "];\n";
    code += "          for (int64_t ow = hi; ow < " + S(OW) + "; ++ow) d[ow] = 0;\n        }\n      }\n    }\n";
    cols_ptr = "col";
    ldb = "cols";
  }
  code += "    tj_gemm(" + pool() + ", false, false, m1 - m0, cols, " + S(Kc) + ", " + Wt + " + (g*" + S(Mg) + " + m0)*" + S(Kc) + ", " + S(Kc) + ", " +
          cols_ptr + ", " + ldb + ", " + Y + " + (b*" + S(M) + " + g*" + S(Mg) + " + m0)*" + S(P) + " + r0*" + S(OW) + ", " + S(P) + ");\n";
  if (epilogue) code += "    {\n" + epilogue_over("g*" + S(Mg) + " + m0", "g*" + S(Mg) + " + m1", "r0", "r1") + "    }\n";
  code += close_parallel() + "  }\n";
  return code;
}

}  // namespace tj::cpp
