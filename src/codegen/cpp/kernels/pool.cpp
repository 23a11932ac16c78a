// The C++ emitter's max pooling kernel (max_pool's channels-last form, f32,
// over 2 spatial dims: KernelKind::pool; the op's row is ir/ops/pool.cpp):
// per output position, its channels start at -inf and take the IEEE maximum
// (tj_max) with each tap inside the image in row-major order, vectors of
// channels read in place: the reference kernel's order with the pads (-inf,
// which never win) skipped, so the same bits. Other forms the driver lowers
// to windows.
#include "codegen/cpp/emitter.h"
#include "codegen/cpp/kernels/conv_common.h"
#include "tensorjit/error.h"

namespace tj::cpp {

using namespace conv_kernels;

std::string Emitter::max_pool_body(const Kernel& K) {
  const ValueId pv = K.ops[0];
  const Node& n = g_.node(pv);
  const auto sx = shape(n.inputs[0]), so = shape(pv);
  if (T(pv) != "float" || !n.attr_bool("channels_last") || so.size() != 4)
    throw Error("code generation: a max_pool of this form (the driver lowers it to windows)");
  const auto& ker = n.attr_ints("kernel");
  const Plane pl({sx[1].value(), sx[2].value()}, ker, {so[1].value(), so[2].value()}, n.attr_ints("stride"), n.attr_ints("pad_begin"),
                 n.attr_ints("dilation"));
  const int64_t C_ = sx[3].value(), OW = pl.OW;
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
  code += "#pragma omp simd\n      for (int64_t c = 0; c < " + S(C_) + "; ++c) yp[c] = -INFINITY;\n";
  code += "      for (int64_t kh = kh0; kh < kh1; ++kh)\n        for (int64_t kw = kw0; kw < kw1; ++kw) {\n";
  code += "          const float* xp = xb + ((khi + kh*" + S(pl.DH) + ")*" + S(pl.W) + " + kwi + kw*" + S(pl.DW) + ")*" + S(C_) + ";\n";
  code += "#pragma omp simd\n          for (int64_t c = 0; c < " + S(C_) + "; ++c) yp[c] = tj_max(yp[c], xp[c]);\n        }\n";
  if (K.ops.size() > 1) {
    // The epilogue over this position's channels.
    local_.clear();
    code += "#pragma omp simd\n      for (int64_t c = 0; c < " + S(C_) + "; ++c) {\n";
    code += pointwise_statements(K, 1, Idx{"b", "oh", "ow", "c"}, so, "        ");
    code += "      }\n";
  }
  code += "    }\n    }\n  " + close_parallel();
  return code;
}

}  // namespace tj::cpp
