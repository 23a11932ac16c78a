// The C++ emitter's pooling kernel (max_pool's and sum_pool's channels-last
// form, f32, over 2 spatial dims: KernelKind::pool; the ops' rows are
// ir/ops/pool.cpp): per output position, its channels take the IEEE maximum
// (tj_max) or the sum of each tap inside the image in row-major order,
// vectors of channels read in place, then the epilogue (an average pool's
// division by its window counts). The same bits as the reference kernel:
// a max starts at -inf and skips the pads (-inf never wins); a sum starts at
// -0 (x + -0 is x, every x) and adds one +0 after its taps where its window
// holds a pad: adding the pads' +0s where they fall changes only a -0
// partial sum into +0, and a sum with any +0 in it is never -0. Other
// forms the driver lowers to windows (channels first, the window form's
// one pointwise kernel, the slices summed in registers, beat a kernel over
// planes that added each tap's run of a row in memory: poolformer_s12).
#include "codegen/cpp/emitter.h"
#include "codegen/cpp/kernels/conv_common.h"
#include "tensorjit/error.h"

namespace tj::cpp {

using namespace conv_kernels;

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
  code += "#pragma omp simd\n      for (int64_t c = 0; c < " + S(C_) + "; ++c) yp[c] = " + (sum ? "-0.0f" : "-INFINITY") + ";\n";
  code += "      for (int64_t kh = kh0; kh < kh1; ++kh)\n        for (int64_t kw = kw0; kw < kw1; ++kw) {\n";
  code += "          const float* xp = xb + ((khi + kh*" + S(pl.DH) + ")*" + S(pl.W) + " + kwi + kw*" + S(pl.DW) + ")*" + S(C_) + ";\n";
  code += "#pragma omp simd\n          for (int64_t c = 0; c < " + S(C_) + "; ++c) yp[c] = " + (sum ? "yp[c] + xp[c]" : "tj_max(yp[c], xp[c])") + ";\n        }\n";
  if (sum)
    code += "      if (std::max(0, kh1 - kh0)*std::max(0, kw1 - kw0) < " + S(pl.KH * pl.KW) + ")\n#pragma omp simd\n        for (int64_t c = 0; c < " + S(C_) +
            "; ++c) yp[c] = yp[c] + 0.0f;\n";
  code += pool_epilogue(K, "c", C_, Idx{"b", "oh", "ow", "c"});  // over this position's channels
  code += "    }\n    }\n  " + close_parallel();
  return code;
}

}  // namespace tj::cpp
