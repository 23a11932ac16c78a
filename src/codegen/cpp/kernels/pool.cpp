// The C++ emitter's pooling kernel (max_pool's and sum_pool's channels-last
// form, f32, over 2 spatial dims: KernelKind::pool; the ops' rows are
// ir/ops/pool.cpp): per output position, its channels take the IEEE maximum
// (tj_max, lane by lane on vectors) or the sum of each tap inside the image in
// row-major order, vectors of channels held in registers over the taps
// (tj_pool_cl), then the epilogue (an average pool's division by its window
// counts). The same bits as the reference kernel: a max starts at -inf and
// skips the pads (-inf never wins); a sum starts at -0 (x + -0 is x, every
// x) and adds one +0 after its taps where its window holds a pad: adding the
// pads' +0s where they fall changes only a -0 partial sum into +0, and a sum
// with any +0 in it is never -0. Other forms the driver lowers to windows
// (channels first, the window form's one pointwise kernel, the slices
// summed in registers, beat a kernel over planes that added each tap's run
// of a row in memory: poolformer_s12).
#include "codegen/cpp/emitter.h"
#include "codegen/cpp/kernels/conv_common.h"
#include "tensorjit/error.h"

namespace tj::cpp {

using namespace conv_kernels;

// The pool of one output position over C channels: its window's first tap
// at x + o (o may be negative: a pad; rows xr floats apart, columns xk), the taps [kh0, kh1) x [kw0, kw1)
// inside the image, into y. Four vectors of channels at a time, then one,
// then the channels left one by one, each held in a register over the taps
// (a loop that read and wrote y per tap waited on its own stores: resnet's
// 56x56x64 max pool 126-130 us on Zen 5, shufflenet's 24 channels one
// vector and 8 lanes left). PADS: the window holds a pad (a sum adds +0).
std::string Emitter::pool_helpers() {
  return "template <bool SUM, int NV, class V>\n"
         "static inline void tj_pool_vecs(const float* x, int64_t o, int64_t xr, int64_t xk, float* y, int kh0, int kh1, int kw0, int kw1, bool pads) {\n"
         "  constexpr int L = sizeof(V) / sizeof(float);\n"
         "  V acc[NV];\n"
         "  for (int v = 0; v < NV; ++v) acc[v] = -V{} + (SUM ? -0.0f : -INFINITY);  // -0 + s is s, -0 too (+0 + -0 is +0)\n"
         "  for (int kh = kh0; kh < kh1; ++kh)\n    for (int kw = kw0; kw < kw1; ++kw) {\n"
         "      const float* xp = x + (o + kh*xr + kw*xk);\n"
         "      for (int v = 0; v < NV; ++v) {\n"
         "        V t;\n        __builtin_memcpy(&t, xp + L*v, sizeof(V));\n"
         "        if constexpr (SUM) acc[v] = acc[v] + t;\n        else acc[v] = tj_max(acc[v], t);\n      }\n    }\n"
         "  for (int v = 0; v < NV; ++v) {\n"
         "    if constexpr (SUM) if (pads) acc[v] = acc[v] + 0.0f;\n"
         "    __builtin_memcpy(y + L*v, &acc[v], sizeof(V));\n  }\n}\n"
         "template <bool SUM>\n"
         "static inline void tj_pool_cl(const float* x, int64_t o, int64_t xr, int64_t xk, int64_t C, float* y, int kh0, int kh1, int kw0, int kw1, bool pads) {\n"
         "  int64_t c = 0;\n"
         "  for (; c + 4*tj_lanes <= C; c += 4*tj_lanes) tj_pool_vecs<SUM, 4, tj_vfn>(x, o + c, xr, xk, y + c, kh0, kh1, kw0, kw1, pads);\n"
         "  for (; c + tj_lanes <= C; c += tj_lanes) tj_pool_vecs<SUM, 1, tj_vfn>(x, o + c, xr, xk, y + c, kh0, kh1, kw0, kw1, pads);\n"
         // The channels past the last whole vector as one vector moved back
         // to end at C: its other channels come out the same bits again
         // (shufflenet_v2_x0_5's 24 channels took 8 scalar lanes: its
         // 112x112 pool 436 -> 62 us).
         "  if (c < C && C >= tj_lanes) tj_pool_vecs<SUM, 1, tj_vfn>(x, o + C - tj_lanes, xr, xk, y + C - tj_lanes, kh0, kh1, kw0, kw1, pads);\n"
         "  else for (; c < C; ++c) tj_pool_vecs<SUM, 1, float>(x, o + c, xr, xk, y + c, kh0, kh1, kw0, kw1, pads);\n}\n";
}

// The epilogue (K's ops after the pool) in a loop of `var` over [0, n), at
// index `at` of the pool's output.
std::string Emitter::pool_epilogue(const Kernel& K, const std::string& var, int64_t n, const Idx& at) {
  if (K.ops.size() <= 1) return "";
  local_.clear();
  return "#pragma omp simd\n      for (int64_t " + var + " = 0; " + var + " < " + S(n) + "; ++" + var + ") {\n" +
         pointwise_statements(K, 1, at, shape(K.ops[0]), "        ") + "      }\n";
}

std::string Emitter::pool_body(const Kernel& K) {
  const ValueId pv = K.ops[0];
  const Node& n = g_.node(pv);
  const bool sum = n.op == Op::sum_pool;
  const auto sx = shape(n.inputs[0]), so = shape(pv);
  if (T(pv) != "float" || !n.attr_bool("channels_last") || so.size() != 4)
    throw Error(std::string("code generation: a ") + n.def().name + " of this form (the driver lowers it to windows)");
  const auto& ker = n.attr_ints("kernel");
  const Plane pl({sx[1].value(), sx[2].value()}, ker, {so[1].value(), so[2].value()}, n.attr_ints("stride"), n.attr_ints("pad_begin"),
                 n.attr_ints("dilation"));
  const int64_t C_ = sx[3].value(), OW = pl.OW;
  uses_pool_ = true;
  std::string code;
  const std::string X = dense_operand(n.inputs[0], &code), Y = ptr(pv), Nn = C(so[0]);
  // Parts of whole output rows, about kDepthwiseOutputs outputs each, over every image.
  const int64_t RB = std::max<int64_t>(1, std::min<int64_t>(pl.OH, kDepthwiseOutputs / std::max<int64_t>(1, OW * C_)));
  const int64_t RBs = (pl.OH + RB - 1) / RB;
  code += "  " + open_parallel(Nn + "*" + S(RBs));
  code += "    const int64_t b = tj_part / " + S(RBs) + ", r0 = tj_part % " + S(RBs) + " * " + S(RB) + ", r1 = std::min<int64_t>(" + S(pl.OH) + ", r0 + " +
          S(RB) + ");\n";
  code += "    const float* xb = " + X + " + b*" + S(pl.H * pl.W * C_) + ";\n";
  // The taps inside the image of the window at each output position.
  code += "    for (int64_t oh = r0; oh < r1; ++oh) {\n" + tap_range("oh", pl.SH, pl.PH, pl.DH, pl.KH, pl.H, "kh", "      ");
  code += "    for (int64_t ow = 0; ow < " + S(OW) + "; ++ow) {\n" + tap_range("ow", pl.SW, pl.PW, pl.DW, pl.KW, pl.W, "kw", "      ");
  code += "      float* yp = " + Y + " + ((b*" + S(pl.OH) + " + oh)*" + S(OW) + " + ow)*" + S(C_) + ";\n";
  const std::string pads = sum ? "std::max(0, kh1 - kh0)*std::max(0, kw1 - kw0) < " + S(pl.KH * pl.KW) : "false";
  code += "      tj_pool_cl<" + std::string(sum ? "true" : "false") + ">(xb, (khi*" + S(pl.W) + " + kwi)*" + S(C_) + ", " + S(pl.DH * pl.W * C_) + ", " +
          S(pl.DW * C_) + ", " + S(C_) + ", yp, kh0, kh1, kw0, kw1, " + pads + ");\n";
  code += pool_epilogue(K, "c", C_, Idx{"b", "oh", "ow", "c"});  // over this position's channels
  code += "    }\n    }\n  " + close_parallel();
  return code;
}

}  // namespace tj::cpp
