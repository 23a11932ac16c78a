// Elementwise op rows: unary and binary arithmetic, comparisons, logic and
// selection. Each row is the whole op: schema, inference, FLOPs, the
// reference scalar function the interpreter maps over the operands (floats
// in the compute type, integers and bools in int64, wrapped to the result's
// width afterwards), and the C expression generated code evaluates (fused
// with its neighbours by any kernel kind). In C, $0.. are the operands, $T
// the result's type, $S operand 0's type; helpers live in the C++ prelude
// (src/codegen/cpp/emit.cpp) or, for one op alone, in its row's c_helpers.
#include <algorithm>
#include <cmath>

#include "ir/differ.h"
#include "ir/ops/infer.h"
#include "ir/ops/rows.h"
#include "ir/ops/scalar_math.h"

namespace tj::rows {

namespace {

using AK = AttrKind;
using Cat = OpCategory;
using K = ScalarAttrs;
using I = int64_t;
using namespace scalar;

// One C form for every dtype, or one for integer results and one for the rest.
#define C_FORM(form) [](const CExpr& e) { return e.fmt(form); }
#define C_INT_OR(int_form, form) [](const CExpr& e) { return e.fmt(e.integer ? int_form : form); }

Type infer_cast(InferCtx& c) { return {c.attr<DType>("to"), c.in[0].shape}; }

Type infer_where(InferCtx& c) {
  if (c.in[0].dtype != DType::boolean) c.fail("condition must be bool, got " + c.in[0].str());
  if (c.in[1].dtype != c.in[2].dtype) c.fail("branch dtypes differ: " + c.in[1].str() + " vs " + c.in[2].str());
  return {c.in[1].dtype, infer::broadcast(c, {&c.in[0].shape, &c.in[1].shape, &c.in[2].shape})};
}

// Float to integer saturates, NaN becomes 0; integer to integer wraps; to
// bool is x != 0. The interpreter's kernel is `cast` in reference/kernels.cpp.
constexpr const char* kCastHelpers =
    "template <class To, class From> static inline To tj_cast(From x) {\n"
    "  if constexpr (std::is_same_v<To, uint8_t>) return (uint8_t)(x != 0);  // bool\n"
    "  else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) return tj_f2i<To, From>(x);\n"
    "  else return (To)x;  // int to int wraps (C++20), to float rounds\n}\n";

// The same in GPU C: to bool (uint8_t there too) is x != 0; float to
// integer saturates (tj_f2i_<to>_<from>); the rest converts as C does.
std::string gpu_cast(const CExpr& e) {
  if (e.T == "uint8_t") return e.fmt("(uint8_t)(($0) != 0)");
  if (e.integer && (e.S == "float" || e.S == "double")) return e.fmt("tj_f2i_$T_$S($0)");
  return e.fmt("(($T)($0))");
}

constexpr const char* kModHelpers =
    "template <class T> static inline T tj_imod(T a, T b, bool fmod) {\n"
    "  if (b == 0) { __atomic_store_n(&tj_status, tj_status_division_by_zero, __ATOMIC_RELAXED); return 0; }\n"
    "  if constexpr (std::is_signed_v<T>) { if (b == -1) return 0; }\n"
    "  T r = (T)(a % b);\n"
    "  return !fmod && r != 0 && ((r < 0) != (b < 0)) ? (T)(r + b) : r;\n}\n"
    "template <class T> static inline T tj_fmod(T a, T b, bool fmod) {\n"
    "  T r = std::fmod(a, b);\n"
    "  if (fmod) return r;\n"
    "  if (r != 0) return (b < 0) != (r < 0) ? r + b : r;\n"
    "  return std::copysign((T)0, b);\n}\n";

// Derivative rules (ir/differ.h). y is the result, dy its cotangent.
// Piecewise constant (floor, ceil, round, sign): zero, given as nothing.
void d_zero(Differ&) {}
void d_neg(Differ& d) { d.give(0, d.neg(d.dy)); }
void d_exp(Differ& d) { d.give(0, d.mul(d.dy, d.y)); }
void d_log(Differ& d) { d.give(0, d.div(d.dy, d.x(0))); }
void d_tanh(Differ& d) { d.give(0, d.mul(d.dy, d.sub(d.c(1), d.mul(d.y, d.y)))); }
void d_sqrt(Differ& d) { d.give(0, d.div(d.mul(d.dy, d.c(0.5)), d.y)); }
// d rsqrt(x) = -x^(-3/2) / 2 = -y^3 / 2
void d_rsqrt(Differ& d) { d.give(0, d.mul(d.mul(d.dy, d.c(-0.5)), d.mul(d.y, d.mul(d.y, d.y)))); }
void d_sin(Differ& d) { d.give(0, d.mul(d.dy, d.op(Op::cos, {d.x(0)}))); }
void d_cos(Differ& d) { d.give(0, d.neg(d.mul(d.dy, d.op(Op::sin, {d.x(0)})))); }
void d_abs(Differ& d) { d.give(0, d.mul(d.dy, d.op(Op::sign, {d.x(0)}))); }
void d_sigmoid(Differ& d) { d.give(0, d.mul(d.dy, d.mul(d.y, d.sub(d.c(1), d.y)))); }
void d_recip(Differ& d) { d.give(0, d.neg(d.mul(d.dy, d.mul(d.y, d.y)))); }
// Between float types: the cotangent cast back. From or to an integer: none.
void d_cast(Differ& d) {
  if (is_float(d.type(d.x(0)).dtype) && is_float(d.dtype())) d.give(0, d.op(Op::cast, {d.dy}, {{"to", d.type(d.x(0)).dtype}}));
}
// 2/sqrt(pi) exp(-x^2)
void d_erf(Differ& d) {
  ValueId x = d.x(0);
  d.give(0, d.mul(d.dy, d.mul(d.c(M_2_SQRTPI), d.op(Op::exp, {d.neg(d.mul(x, x))}))));
}
// 1 + tan^2
void d_tan(Differ& d) { d.give(0, d.mul(d.dy, d.add(d.c(1), d.mul(d.y, d.y)))); }
// +-1 / sqrt(1 - x^2)
void d_asin(Differ& d) { d.give(0, d.div(d.dy, d.op(Op::sqrt, {d.sub(d.c(1), d.mul(d.x(0), d.x(0)))}))); }
void d_acos(Differ& d) { d.give(0, d.neg(d.div(d.dy, d.op(Op::sqrt, {d.sub(d.c(1), d.mul(d.x(0), d.x(0)))})))); }
void d_atan(Differ& d) { d.give(0, d.div(d.dy, d.add(d.c(1), d.mul(d.x(0), d.x(0))))); }
void d_sinh(Differ& d) { d.give(0, d.mul(d.dy, d.op(Op::cosh, {d.x(0)}))); }
void d_cosh(Differ& d) { d.give(0, d.mul(d.dy, d.op(Op::sinh, {d.x(0)}))); }
void d_asinh(Differ& d) { d.give(0, d.div(d.dy, d.op(Op::sqrt, {d.add(d.mul(d.x(0), d.x(0)), d.c(1))}))); }
void d_acosh(Differ& d) { d.give(0, d.div(d.dy, d.op(Op::sqrt, {d.sub(d.mul(d.x(0), d.x(0)), d.c(1))}))); }
void d_atanh(Differ& d) { d.give(0, d.div(d.dy, d.sub(d.c(1), d.mul(d.x(0), d.x(0))))); }
// atan2(a, b): (b, -a) / (a^2 + b^2)
void d_atan2(Differ& d) {
  ValueId a = d.x(0), b = d.x(1);
  ValueId r2 = d.add(d.mul(a, a), d.mul(b, b));
  if (d.wants(0)) d.give(0, d.div(d.mul(d.dy, b), r2));
  if (d.wants(1)) d.give(1, d.neg(d.div(d.mul(d.dy, a), r2)));
}
void d_log1p(Differ& d) { d.give(0, d.div(d.dy, d.add(d.c(1), d.x(0)))); }
void d_expm1(Differ& d) { d.give(0, d.mul(d.dy, d.add(d.y, d.c(1)))); }
// Where x > 0 (the subgradient 0 at 0, as torch and JAX).
void d_relu(Differ& d) { d.give(0, d.keep(d.op(Op::gt, {d.x(0), d.c(0)}), d.dy)); }
void d_softplus(Differ& d) { d.give(0, d.mul(d.dy, d.op(Op::sigmoid, {d.x(0)}))); }
void d_leaky_relu(Differ& d) {
  ValueId neg = d.op(Op::lt, {d.x(0), d.c(0)});
  d.give(0, d.op(Op::where, {neg, d.mul(d.dy, d.c(d.n.attr_float("alpha"))), d.dy}));
}
// torch's: 0 below -3, 1 above 3, (2x + 3) / 6 between.
void d_hardswish(Differ& d) {
  ValueId x = d.x(0);
  ValueId mid = d.div(d.add(d.mul(x, d.c(2)), d.c(3)), d.c(6));
  ValueId slope = d.op(Op::where, {d.op(Op::lt, {x, d.c(-3)}), d.c(0), d.op(Op::where, {d.op(Op::gt, {x, d.c(3)}), d.c(1), mid})});
  d.give(0, d.mul(d.dy, slope));
}
void d_add(Differ& d) {
  d.give(0, d.dy);
  d.give(1, d.dy);
}
void d_sub(Differ& d) {
  d.give(0, d.dy);
  if (d.wants(1)) d.give(1, d.neg(d.dy));
}
void d_mul(Differ& d) {
  if (d.wants(0)) d.give(0, d.mul(d.dy, d.x(1)));
  if (d.wants(1)) d.give(1, d.mul(d.dy, d.x(0)));
}
void d_div(Differ& d) {
  if (d.wants(0)) d.give(0, d.div(d.dy, d.x(1)));
  if (d.wants(1)) d.give(1, d.neg(d.div(d.mul(d.dy, d.y), d.x(1))));  // -dy a / b^2 = -dy y / b
}
// max and min: the cotangent to the operand chosen; half to each on a tie
// (as JAX and torch.maximum).
void d_max_min(Differ& d, Op better) {
  ValueId a = d.x(0), b = d.x(1);
  ValueId half = d.mul(d.dy, d.c(0.5));
  ValueId tie = d.op(Op::eq, {a, b});
  if (d.wants(0)) d.give(0, d.op(Op::where, {tie, half, d.keep(d.op(better, {a, b}), d.dy)}));
  if (d.wants(1)) d.give(1, d.op(Op::where, {tie, half, d.keep(d.op(better, {b, a}), d.dy)}));
}
void d_max(Differ& d) { d_max_min(d, Op::gt); }
void d_min(Differ& d) { d_max_min(d, Op::lt); }
// a^b: b a^(b-1) and, where a != 0, a^b log a (0 where a == 0, as JAX).
void d_pow(Differ& d) {
  ValueId a = d.x(0), b = d.x(1);
  if (d.wants(0)) d.give(0, d.mul(d.dy, d.mul(b, d.op(Op::pow, {a, d.sub(b, d.c(1))}))));
  if (d.wants(1)) {
    ValueId zero = d.op(Op::eq, {a, d.c(0)});
    ValueId safe = d.op(Op::where, {zero, d.c(1), a});
    d.give(1, d.op(Op::where, {zero, d.c(0), d.mul(d.dy, d.mul(d.y, d.op(Op::log, {safe})))}));
  }
}
// a - q b (q the rounded quotient, piecewise constant): 1 for a.
void d_mod(Differ& d) {
  d.give(0, d.dy);
  if (d.wants(1)) throw Unsupported("mod is not differentiable in its divisor here (d/db of a mod b = -floor(a/b))");
}
void d_where(Differ& d) {
  ValueId cond = d.x(0);
  if (d.wants(1)) d.give(1, d.keep(cond, d.dy));
  if (d.wants(2)) d.give(2, d.keep(d.op(Op::logical_not, {cond}), d.dy));
}
// min(max(x, lo), hi): to x where lo <= x <= hi, to lo where x < lo (and
// lo <= hi), to hi where x > hi or lo > hi.
void d_clip(Differ& d) {
  ValueId x = d.x(0), lo = d.x(1), hi = d.x(2);
  ValueId above = d.op(Op::logical_or, {d.op(Op::gt, {x, hi}), d.op(Op::gt, {lo, hi})});
  ValueId below = d.op(Op::logical_and, {d.op(Op::lt, {x, lo}), d.op(Op::logical_not, {above})});
  if (d.wants(0)) d.give(0, d.keep(d.op(Op::logical_not, {d.op(Op::logical_or, {above, below})}), d.dy));
  if (d.wants(1)) d.give(1, d.keep(below, d.dy));
  if (d.wants(2)) d.give(2, d.keep(above, d.dy));
}

}  // namespace

std::vector<OpDef> elementwise() {
  return {
      {.op = Op::neg, .name = "neg", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::numeric_unary,
       .fuse = Fuse::pointwise, .scalar = both<1>([](auto x) { return -x; }, [](I x) { return wrap_neg(x); }),
       .c_expr = C_INT_OR("tj_ineg<$T>($0)", "(-($0))"), .gpu_expr = C_INT_OR("tj_ineg_$T($0)", "(-($0))"), .grad = d_neg},
      {.op = Op::exp, .name = "exp", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::exp(x); }),
       .c_expr = C_FORM("tj_exp(($T)($0))"), .gpu_expr = C_FORM("exp(($T)($0))"), .grad = d_exp},
      {.op = Op::log, .name = "log", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::log(x); }),
       .c_expr = C_FORM("std::log($0)"), .gpu_expr = C_FORM("log($0)"), .grad = d_log},
      {.op = Op::tanh, .name = "tanh", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::tanh(x); }),
       .c_expr = C_FORM("std::tanh($0)"), .gpu_expr = C_FORM("tanh($0)"), .grad = d_tanh},
      {.op = Op::sqrt, .name = "sqrt", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::sqrt(x); }),
       .c_expr = C_FORM("std::sqrt($0)"), .gpu_expr = C_FORM("sqrt($0)"), .grad = d_sqrt},
      {.op = Op::rsqrt, .name = "rsqrt", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return decltype(x)(1) / std::sqrt(x); }),
       .c_expr = C_FORM("(($T)1/std::sqrt($0))"), .gpu_expr = C_FORM("(($T)1/sqrt($0))"), .grad = d_rsqrt},
      {.op = Op::sin, .name = "sin", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::sin(x); }),
       .c_expr = C_FORM("std::sin($0)"), .gpu_expr = C_FORM("sin($0)"), .grad = d_sin},
      {.op = Op::cos, .name = "cos", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::cos(x); }),
       .c_expr = C_FORM("std::cos($0)"), .gpu_expr = C_FORM("cos($0)"), .grad = d_cos},
      // abs(INT_MIN) wraps to INT_MIN.
      {.op = Op::abs, .name = "abs", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::numeric_unary,
       .fuse = Fuse::pointwise, .scalar = both<1>([](auto x) { return std::abs(x); }, [](I x) { return x < 0 ? wrap_neg(x) : x; }),
       .c_expr = C_INT_OR("tj_iabs<$T>($0)", "std::abs($0)"), .gpu_expr = C_INT_OR("tj_iabs_$T($0)", "fabs($0)"), .grad = d_abs},
      {.op = Op::sigmoid, .name = "sigmoid", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return decltype(x)(1) / (decltype(x)(1) + std::exp(-x)); }),
       .c_expr = C_FORM("tj_sigmoid(($T)($0))"), .gpu_expr = C_FORM("(($T)1/(($T)1+exp(($T)(-($0)))))"), .grad = d_sigmoid},
      {.op = Op::recip, .name = "recip", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return decltype(x)(1) / x; }),
       .c_expr = C_FORM("(($T)1/($0))"), .grad = d_recip},
      // saturate: a float8 result beyond the format's range is its largest
      // value (true, ONNX's default) or infinity/NaN (false).
      {.op = Op::cast, .name = "cast", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"to", AK::DTypeK, std::nullopt}, {"saturate", AK::Bool, AttrValue(true)}}, .infer = infer_cast,
       .fuse = Fuse::pointwise, .flops = 0,
       .c_expr = C_FORM("tj_cast<$T, $S>($0)"), .gpu_expr = gpu_cast, .c_helpers = kCastHelpers, .grad = d_cast},
      {.op = Op::erf, .name = "erf", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::erf(x); }),
       .c_expr = C_FORM("std::erf($0)"), .gpu_expr = C_FORM("erf($0)"), .grad = d_erf},
      {.op = Op::floor, .name = "floor", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::floor(x); }),
       .c_expr = C_FORM("std::floor($0)"), .gpu_expr = C_FORM("floor($0)"), .grad = d_zero},
      {.op = Op::ceil, .name = "ceil", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::ceil(x); }),
       .c_expr = C_FORM("std::ceil($0)"), .gpu_expr = C_FORM("ceil($0)"), .grad = d_zero},
      // Halves to even (numpy, torch, ONNX): the default rounding mode.
      {.op = Op::round, .name = "round", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::nearbyint(x); }),
       .c_expr = C_FORM("std::nearbyint($0)"), .gpu_expr = C_FORM("rint($0)"), .grad = d_zero},
      // -1, 0 or 1; a float zero keeps its sign and NaN stays NaN.
      {.op = Op::sign, .name = "sign", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::numeric_unary,
       .fuse = Fuse::pointwise,
       .scalar = both<1>([](auto x) { return x > 0 ? decltype(x)(1) : x < 0 ? decltype(x)(-1) : x; }, [](I x) { return I(x > 0) - I(x < 0); }),
       .c_expr = C_INT_OR("(($T)(($0) > 0) - ($T)(($0) < 0))", "(($0) > 0 ? ($T)1 : ($0) < 0 ? ($T)-1 : ($0))"), .grad = d_zero},
      {.op = Op::log1p, .name = "log1p", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::log1p(x); }),
       .c_expr = C_FORM("std::log1p($0)"), .gpu_expr = C_FORM("log1p($0)"), .grad = d_log1p},
      {.op = Op::expm1, .name = "expm1", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::expm1(x); }),
       .c_expr = C_FORM("std::expm1($0)"), .gpu_expr = C_FORM("expm1($0)"), .grad = d_expm1},
      // max(x, 0): NaN stays NaN, -0 becomes +0.
      {.op = Op::relu, .name = "relu", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::numeric_unary,
       .fuse = Fuse::pointwise, .scalar = both<1>([](auto x) { return ieee_max(x, decltype(x)(0)); }, [](I x) { return std::max<I>(x, 0); }),
       .c_expr = C_INT_OR("std::max<$T>($0, 0)", "tj_max<$T>($0, ($T)0)"),
       .gpu_expr = C_INT_OR("tj_smax_$T($0, ($T)0)", "tj_max_$T($0, ($T)0)"), .grad = d_relu},
      // log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|)).
      {.op = Op::softplus, .name = "softplus", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .flops = 4,
       .scalar = floats<1>([](auto x) { return ieee_max(x, decltype(x)(0)) + std::log1p(std::exp(-std::abs(x))); }),
       .c_expr = C_FORM("(tj_max<$T>($0, ($T)0) + std::log1p(tj_exp(($T)(-std::abs($0)))))"),
       .gpu_expr = C_FORM("(tj_max_$T($0, ($T)0) + log1p(exp(($T)(-fabs($0)))))"), .grad = d_softplus},
      {.op = Op::leaky_relu, .name = "leaky_relu", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"alpha", AK::Float, AttrValue(0.01)}}, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .flops = 2, .scalar = floats<1>([](auto x, K k) { return x < 0 ? decltype(x)(k[0]) * x : x; }),
       .c_expr = [](const CExpr& e) { return e.fmt("(($0) < 0 ? " + e.lit(e.k[0]) + "*($0) : ($0))"); }, .grad = d_leaky_relu},
      // x * relu6(x + 3) / 6, as torch computes it.
      {.op = Op::hardswish, .name = "hardswish", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .flops = 4,
       .scalar = floats<1>([](auto x) {
         using E = decltype(x);
         return x * std::min(std::max(x + E(3), E(0)), E(6)) / E(6);
       }),
       .c_expr = C_FORM("(($0) * std::min<$T>(std::max<$T>(($0) + ($T)3, ($T)0), ($T)6) / ($T)6)"),
       .gpu_expr = C_FORM("(($0) * tj_smin_$T(tj_smax_$T(($0) + ($T)3, ($T)0), ($T)6) / ($T)6)"), .grad = d_hardswish},
      // The rest of C's <math.h>, as torch and ONNX have them.
      {.op = Op::tan, .name = "tan", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::tan(x); }),
       .c_expr = C_FORM("std::tan($0)"), .gpu_expr = C_FORM("tan($0)"), .grad = d_tan},
      {.op = Op::asin, .name = "asin", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::asin(x); }),
       .c_expr = C_FORM("std::asin($0)"), .gpu_expr = C_FORM("asin($0)"), .grad = d_asin},
      {.op = Op::acos, .name = "acos", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::acos(x); }),
       .c_expr = C_FORM("std::acos($0)"), .gpu_expr = C_FORM("acos($0)"), .grad = d_acos},
      {.op = Op::atan, .name = "atan", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::atan(x); }),
       .c_expr = C_FORM("std::atan($0)"), .gpu_expr = C_FORM("atan($0)"), .grad = d_atan},
      {.op = Op::sinh, .name = "sinh", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::sinh(x); }),
       .c_expr = C_FORM("std::sinh($0)"), .gpu_expr = C_FORM("sinh($0)"), .grad = d_sinh},
      {.op = Op::cosh, .name = "cosh", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::cosh(x); }),
       .c_expr = C_FORM("std::cosh($0)"), .gpu_expr = C_FORM("cosh($0)"), .grad = d_cosh},
      {.op = Op::asinh, .name = "asinh", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::asinh(x); }),
       .c_expr = C_FORM("std::asinh($0)"), .gpu_expr = C_FORM("asinh($0)"), .grad = d_asinh},
      {.op = Op::acosh, .name = "acosh", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::acosh(x); }),
       .c_expr = C_FORM("std::acosh($0)"), .gpu_expr = C_FORM("acosh($0)"), .grad = d_acosh},
      {.op = Op::atanh, .name = "atanh", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::atanh(x); }),
       .c_expr = C_FORM("std::atanh($0)"), .gpu_expr = C_FORM("atanh($0)"), .grad = d_atanh},
      {.op = Op::trunc, .name = "trunc", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .scalar = floats<1>([](auto x) { return std::trunc(x); }),
       .c_expr = C_FORM("std::trunc($0)"), .gpu_expr = C_FORM("trunc($0)"), .grad = d_zero},
      // Integers' bits (two's complement); bool operands are 0 and 1.
      {.op = Op::bitwise_not, .name = "bitwise_not", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1,
       .infer = infer::integer_unary,
       .fuse = Fuse::pointwise, .scalar = ints<1>([](I x) { return ~x; }), .c_expr = C_FORM("(($T)~($0))")},

      {.op = Op::add, .name = "add", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2, .infer = infer::binary, .commutative = true,
       .fuse = Fuse::pointwise, .scalar = both<2>([](auto a, auto b) { return a + b; }, [](I a, I b) { return wrap_add(a, b); }),
       .c_expr = C_INT_OR("tj_iadd<$T>($0, $1)", "($0+$1)"), .gpu_expr = C_INT_OR("tj_iadd_$T($0, $1)", "($0+$1)"), .grad = d_add},
      {.op = Op::sub, .name = "sub", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2, .infer = infer::binary,
       .fuse = Fuse::pointwise, .scalar = both<2>([](auto a, auto b) { return a - b; }, [](I a, I b) { return wrap_sub(a, b); }),
       .c_expr = C_INT_OR("tj_isub<$T>($0, $1)", "($0-$1)"), .gpu_expr = C_INT_OR("tj_isub_$T($0, $1)", "($0-$1)"), .grad = d_sub},
      {.op = Op::mul, .name = "mul", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2, .infer = infer::binary, .commutative = true,
       .fuse = Fuse::pointwise, .scalar = both<2>([](auto a, auto b) { return a * b; }, [](I a, I b) { return wrap_mul(a, b); }),
       .c_expr = C_INT_OR("tj_imul<$T>($0, $1)", "($0*$1)"), .gpu_expr = C_INT_OR("tj_imul_$T($0, $1)", "($0*$1)"), .grad = d_mul},
      {.op = Op::div, .name = "div", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2, .infer = infer::binary,
       .fuse = Fuse::pointwise, .scalar = both<2>([](auto a, auto b) { return a / b; }, [](I a, I b) { return int_div(a, b); }),
       .c_expr = C_INT_OR("tj_idiv<$T>($0, $1)", "($0/$1)"), .gpu_expr = C_INT_OR("tj_idiv_$T($0, $1, tj_status)", "($0/$1)"),
       .int_divides = true, .grad = d_div},
      {.op = Op::max, .name = "max", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2, .infer = infer::binary, .commutative = true,
       .fuse = Fuse::pointwise, .scalar = both<2>([](auto a, auto b) { return ieee_max(a, b); }, [](I a, I b) { return std::max(a, b); }),
       .c_expr = C_INT_OR("std::max<$T>($0, $1)", "tj_max<$T>($0, $1)"), .gpu_expr = C_INT_OR("tj_smax_$T($0, $1)", "tj_max_$T($0, $1)"),
       .grad = d_max},
      {.op = Op::min, .name = "min", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2, .infer = infer::binary, .commutative = true,
       .fuse = Fuse::pointwise, .scalar = both<2>([](auto a, auto b) { return ieee_min(a, b); }, [](I a, I b) { return std::min(a, b); }),
       .c_expr = C_INT_OR("std::min<$T>($0, $1)", "tj_min<$T>($0, $1)"), .gpu_expr = C_INT_OR("tj_smin_$T($0, $1)", "tj_min_$T($0, $1)"),
       .grad = d_min},
      {.op = Op::pow, .name = "pow", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2, .infer = infer::float_binary,
       .fuse = Fuse::pointwise, .scalar = floats<2>([](auto a, auto b) { return std::pow(a, b); }),
       .c_expr = C_FORM("std::pow($0, $1)"), .gpu_expr = C_FORM("pow($0, $1)"), .grad = d_pow},
      {.op = Op::mod, .name = "mod", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2,
       .attrs = {{"fmod", AK::Bool, AttrValue(false)}}, .infer = infer::binary,
       .fuse = Fuse::pointwise, .flops = 2,
       .scalar = both<2>([](auto a, auto b, K k) { return float_mod(a, b, k[0] != 0); }, [](I a, I b, K k) { return int_mod(a, b, k[0] != 0); }),
       .c_expr = [](const CExpr& e) {
         return e.fmt(std::string(e.integer ? "tj_imod" : "tj_fmod") + "<$T>($0, $1, " + (e.k[0] != 0 ? "true" : "false") + ")");
       },
       .gpu_expr = [](const CExpr& e) {
         return e.fmt(std::string(e.integer ? "tj_imod_$T($0, $1, " : "tj_fmod_$T($0, $1, ") + (e.k[0] != 0 ? "1" : "0") +
                      (e.integer ? ", tj_status)" : ")"));
       },
       .c_helpers = kModHelpers, .int_divides = true, .grad = d_mod},
      {.op = Op::atan2, .name = "atan2", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2, .infer = infer::float_binary,
       .fuse = Fuse::pointwise, .scalar = floats<2>([](auto a, auto b) { return std::atan2(a, b); }),
       .c_expr = C_FORM("std::atan2($0, $1)"), .gpu_expr = C_FORM("atan2($0, $1)"), .grad = d_atan2},
      {.op = Op::bitwise_and, .name = "bitwise_and", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2,
       .infer = infer::integer_binary, .commutative = true,
       .fuse = Fuse::pointwise, .scalar = ints<2>([](I a, I b) { return a & b; }), .c_expr = C_FORM("(($T)(($0) & ($1)))")},
      {.op = Op::bitwise_or, .name = "bitwise_or", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2,
       .infer = infer::integer_binary, .commutative = true,
       .fuse = Fuse::pointwise, .scalar = ints<2>([](I a, I b) { return a | b; }), .c_expr = C_FORM("(($T)(($0) | ($1)))")},
      {.op = Op::bitwise_xor, .name = "bitwise_xor", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2,
       .infer = infer::integer_binary, .commutative = true,
       .fuse = Fuse::pointwise, .scalar = ints<2>([](I a, I b) { return a ^ b; }), .c_expr = C_FORM("(($T)(($0) ^ ($1)))")},
      // Shifts computed on the value as an int64 and wrapped to the dtype:
      // bits shifted past the width are gone (0 for a shift of the width or
      // more); right shifts are arithmetic (for unsigned values, below 2^63
      // here, the same as logical: u64 is refused). A negative count acts
      // as one of 64 or more.
      {.op = Op::shift_left, .name = "shift_left", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2,
       .infer = infer::integer_binary,
       .fuse = Fuse::pointwise,
       .scalar = ints<2>([](I a, I b) { return b < 0 || b > 63 ? I(0) : static_cast<I>(static_cast<uint64_t>(a) << b); }),
       .c_expr = C_FORM("(($T)((($1) < 0 || ($1) > 63) ? (int64_t)0 : (int64_t)((uint64_t)(int64_t)($0) << ($1))))")},
      {.op = Op::shift_right, .name = "shift_right", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2,
       .infer = infer::integer_binary,
       .fuse = Fuse::pointwise,
       .scalar = ints<2>([](I a, I b) { return b < 0 || b > 63 ? (a < 0 ? I(-1) : I(0)) : a >> b; }),
       .c_expr = C_FORM("(($T)((($1) < 0 || ($1) > 63) ? ((int64_t)($0) < 0 ? (int64_t)-1 : (int64_t)0) : ((int64_t)($0) >> ($1))))")},

      {.op = Op::eq, .name = "eq", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2, .infer = infer::compare, .commutative = true,
       .fuse = Fuse::pointwise, .scalar = any<2>([](auto a, auto b) { return a == b; }), .c_expr = C_FORM("(uint8_t)($0==$1)")},
      {.op = Op::ne, .name = "ne", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2, .infer = infer::compare, .commutative = true,
       .fuse = Fuse::pointwise, .scalar = any<2>([](auto a, auto b) { return a != b; }), .c_expr = C_FORM("(uint8_t)($0!=$1)")},
      {.op = Op::lt, .name = "lt", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2, .infer = infer::compare,
       .fuse = Fuse::pointwise, .scalar = any<2>([](auto a, auto b) { return a < b; }), .c_expr = C_FORM("(uint8_t)($0<$1)")},
      {.op = Op::le, .name = "le", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2, .infer = infer::compare,
       .fuse = Fuse::pointwise, .scalar = any<2>([](auto a, auto b) { return a <= b; }), .c_expr = C_FORM("(uint8_t)($0<=$1)")},
      {.op = Op::gt, .name = "gt", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2, .infer = infer::compare,
       .fuse = Fuse::pointwise, .scalar = any<2>([](auto a, auto b) { return a > b; }), .c_expr = C_FORM("(uint8_t)($0>$1)")},
      {.op = Op::ge, .name = "ge", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2, .infer = infer::compare,
       .fuse = Fuse::pointwise, .scalar = any<2>([](auto a, auto b) { return a >= b; }), .c_expr = C_FORM("(uint8_t)($0>=$1)")},
      {.op = Op::logical_and, .name = "and", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2, .infer = infer::logical,
       .commutative = true,
       .fuse = Fuse::pointwise, .scalar = ints<2>([](I a, I b) { return a != 0 && b != 0; }),
       .c_expr = C_FORM("(uint8_t)((($0) != 0) & (($1) != 0))")},
      {.op = Op::logical_or, .name = "or", .category = Cat::elementwise, .min_inputs = 2, .max_inputs = 2, .infer = infer::logical,
       .commutative = true,
       .fuse = Fuse::pointwise, .scalar = ints<2>([](I a, I b) { return a != 0 || b != 0; }),
       .c_expr = C_FORM("(uint8_t)((($0) != 0) | (($1) != 0))")},
      {.op = Op::logical_not, .name = "not", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1, .infer = infer::logical,
       .fuse = Fuse::pointwise, .scalar = ints<1>([](I x) { return x == 0; }), .c_expr = C_FORM("(uint8_t)(($0) == 0)")},
      // Both branches are evaluated, as in generated code (an index out of
      // range in either is an error), which selects with a blend.
      {.op = Op::where, .name = "where", .category = Cat::elementwise, .min_inputs = 3, .max_inputs = 3, .infer = infer_where,
       .fuse = Fuse::pointwise, .scalar = any<3>([](auto c, auto a, auto b) { return c != 0 ? a : b; }),
       .c_expr = C_FORM("tj_select<$T>($0, $1, $2)"), .gpu_expr = C_FORM("(($0) ? ($1) : ($2))"), .grad = d_where},
      // min(max(x, lo), hi): NaN propagates; lo > hi gives hi (torch.clamp, ONNX Clip).
      {.op = Op::clip, .name = "clip", .category = Cat::elementwise, .min_inputs = 3, .max_inputs = 3, .infer = infer::binary,
       .fuse = Fuse::pointwise, .flops = 2,
       .scalar = both<3>([](auto x, auto lo, auto hi) { return ieee_min(ieee_max(x, lo), hi); },
                         [](I x, I lo, I hi) { return std::min(std::max(x, lo), hi); }),
       .c_expr = C_INT_OR("std::min<$T>(std::max<$T>($0, $1), $2)", "tj_clip<$T>($0, $1, $2)"),
       .gpu_expr = C_INT_OR("tj_smin_$T(tj_smax_$T($0, $1), $2)", "tj_min_$T(tj_max_$T($0, $1), $2)"), .grad = d_clip},
  };
}

#undef C_FORM
#undef C_INT_OR

}  // namespace tj::rows
