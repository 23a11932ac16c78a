// A channels-last conv by the matrix library: the call the C++ emitter
// writes for the library candidate of conv_channels_last_body (its
// geometry as a tj_conv_desc constant; runtime/library_conv.h plans and
// runs it).
#include "codegen/c_text.h"
#include "codegen/cpp/emitter.h"
#include "codegen/cpp/kernels/conv_common.h"
#include "ir/layout.h"

namespace tj::cpp {

std::optional<tj_conv_desc> Emitter::library_conv_desc(const Kernel& K, const conv_kernels::Plane& pl, const std::optional<Strided>& view, int bits,
                                                       float lo, float hi, bool residual) {
  const Node& n = g_.node(K.ops[0]);
  const auto sx = shape(n.inputs[0]), sw = shape(n.inputs[1]);
  const size_t k = sw.size() - 2;
  const int64_t G = n.attr_int("groups"), C_ = sx.back().value(), M = sw[0].value();
  // The weights' form, as conv_channels_last_body reads them (ir/layout.h):
  // blocks of `lanes` outputs (one group; groups of 16 outputs and more),
  // else taps first (depthwise; groups of 2, 4 or 8 inputs and outputs).
  const int64_t lanes = conv_quad_lanes(sw, G);
  const bool taps = lanes == 0 && taps_first_conv(sw, G);
  if (T(K.ops[0]) != "float" || !shape(K.ops[0])[0].is_const() || k < 1 || k > 2 || n.attr_bool("winograd") || (!taps && lanes == 0)) return std::nullopt;
  if (K.ops.size() > 1 && !(bits & 6) && !residual) return std::nullopt;  // an epilogue the library does not take
  const ValueId w = taps ? packed_conv_taps(g_, n.inputs[1]) : packed_conv_quads(g_, n.inputs[1], lanes);
  if (w < 0 || (g_.node(w).op != Op::constant && g_.node(w).op != Op::param)) return std::nullopt;
  tj_conv_desc d{};
  d.N = shape(K.ops[0])[0].value(), d.C = C_, d.H = pl.H, d.W = pl.W, d.M = M, d.KH = pl.KH, d.KW = pl.KW, d.OH = pl.OH, d.OW = pl.OW;
  d.SH = pl.SH, d.SW = pl.SW, d.PT = pl.PH, d.PL = pl.PW, d.DH = pl.DH, d.DW = pl.DW;
  if (view) {  // x [N, (H,) W, C] at its strides
    const Sizes& st = view->strides;
    for (const Dim& s : st)
      if (!s.is_const()) return std::nullopt;
    d.xs[0] = st[0].value(), d.xs[1] = st[k + 1].value(), d.xs[2] = k == 2 ? st[1].value() : 0, d.xs[3] = st[k].value();
  } else {
    d.xs[0] = pl.H * pl.W * C_, d.xs[1] = 1, d.xs[2] = pl.W * C_, d.xs[3] = C_;
  }
  d.groups = G, d.w_lanes = lanes;
  d.bias = n.inputs.size() > 2 ? 1 : 0;
  d.residual = residual ? 1 : 0;
  d.act = bits & 2 ? 1 : bits & 4 ? 2 : 0;
  d.lo = lo, d.hi = hi;
  // Parts per image, fixed by the sizes: two row blocks, four for a conv
  // of 4M multiply-adds and more (each part is one library call).
  const int64_t macs = d.OH * d.OW * M * (C_ / G) * d.KH * d.KW;
  d.row_blocks = std::min<int64_t>(d.OH, macs >= (int64_t{1} << 22) ? 4 : 2);
  return d;
}

std::string Emitter::conv_library_call(const tj_conv_desc& d, const std::string& x, const std::string& w, const std::string& b,
                                       const std::string& r, const std::string& y, const std::string& otherwise) {
  auto I = [](int64_t v) { return std::to_string(v); };
  std::string init;
  for (int64_t v : {d.N, d.C, d.H, d.W, d.M, d.KH, d.KW, d.OH, d.OW, d.SH, d.SW, d.PT, d.PL, d.DH, d.DW}) init += I(v) + ", ";
  init += "{" + I(d.xs[0]) + ", " + I(d.xs[1]) + ", " + I(d.xs[2]) + ", " + I(d.xs[3]) + "}, " + I(d.groups) + ", " + I(d.w_lanes) + ", " + I(d.bias) + ", " +
          I(d.residual) + ", " + I(d.act) + ", " + literal(d.lo, DType::f32) + ", " + literal(d.hi, DType::f32) + ", " + I(d.row_blocks);
  const std::string fail = "__atomic_store_n(&tj_status, tj_status_gemm_failed, __ATOMIC_RELAXED)";
  std::string c = "  {\n    static const tj_conv_desc tj_cd = {" + init + "};\n";
  c += "    const tj_runtime_api* tj_api = (const tj_runtime_api*)" + pool() + ";\n";
  c += "    void* const tj_plan = tj_api->conv_plan(" + slot(tj_slot_library) + ", &tj_cd, " + w + ");\n";
  c += "    if (tj_plan) {\n";
  c += "    " + open_parallel(I(d.N * d.row_blocks));
  c += "      if (tj_api->conv_part(tj_plan, " + x + ", " + (b.empty() ? std::string("nullptr") : b) + ", " + (r.empty() ? std::string("nullptr") : r) + ", " + y +
       ", tj_part)) " + fail + ";\n";
  c += "    " + close_parallel() + "    } else {\n";
  c += otherwise;
  return c + "    }\n  }\n";
}

}  // namespace tj::cpp
