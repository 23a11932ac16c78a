// Which epilogue a channels-last conv kernel applies itself
// (conv_epilogues.h).
#include "codegen/cpp/kernels/conv_epilogues.h"

#include <cmath>

#include "ir/rewriter.h"

namespace tj::cpp::conv_kernels {

namespace {

// Op a as the epilogue's activation of value v: its bits (2 ReLU, 4 a
// clip by constants, r.lo and r.hi), or 0.
int activation_bits(const Graph& g, const Node& a, ValueId v, RegisterEpilogue& r) {
  if (a.type.dtype != DType::f32 || a.inputs.empty() || a.inputs[0] != v || a.type.shape != g.type(v).shape) return 0;
  if (a.op == Op::relu) return 2;
  if (a.op != Op::clip) return 0;
  const auto lo = splat_value(g, a.inputs[1]), hi = splat_value(g, a.inputs[2]);
  if (!lo || !hi) return 0;
  r.lo = static_cast<float>(*lo), r.hi = static_cast<float>(*hi);
  // tj_clip's fast form: neither bound NaN, lo not -0, hi not +0; nor
  // hi -0 (tj_conv_act broadcasts a bound by adding it to +0)
  if (std::isnan(r.lo) || std::isnan(r.hi) || (r.lo == 0 && std::signbit(r.lo)) || r.hi == 0) return 0;
  return 4;
}

}  // namespace

RegisterEpilogue register_epilogue(const Graph& g, const Kernel& K, ValueId cv, bool bias) {
  RegisterEpilogue r;
  if (K.ops.size() == 1) {
    if (bias) r.bits = 1, r.out = cv;
    return r;
  }
  if (K.ops.size() != 2 || K.writes(cv)) return r;
  r.bits = activation_bits(g, g.node(K.ops[1]), cv, r);
  if (r.bits == 0) return RegisterEpilogue{};
  r.bits |= bias ? 1 : 0;
  r.out = K.ops[1];
  return r;
}

RegisterEpilogue library_epilogue(const Graph& g, const Kernel& K, ValueId cv, bool bias, const RegisterEpilogue& rep) {
  if (rep.bits || K.ops.size() == 1 || K.ops.size() > 3 || K.writes(cv)) return rep;
  const Node& a = g.node(K.ops[1]);
  if (a.op != Op::add || a.inputs.size() != 2 || a.type.dtype != DType::f32 || a.type.shape != g.type(cv).shape) return rep;
  RegisterEpilogue r;
  r.residual = a.inputs[0] == cv ? a.inputs[1] : a.inputs[1] == cv ? a.inputs[0] : -1;
  if (r.residual < 0 || r.residual == cv || g.type(r.residual) != a.type) return rep;
  if (K.ops.size() == 3) {
    if (K.writes(K.ops[1])) return rep;
    r.bits = activation_bits(g, g.node(K.ops[2]), K.ops[1], r);
    if (r.bits == 0) return rep;
  }
  r.bits |= bias ? 1 : 0;
  r.out = K.ops.back();
  return r;
}

}  // namespace tj::cpp::conv_kernels
