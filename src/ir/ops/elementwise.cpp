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
// bool is x != 0. The interpreter's kernel is `cast` in reference_kernels.cpp.
constexpr const char* kCastHelpers =
    "template <class To, class From> static inline To tj_cast(From x) {\n"
    "  if constexpr (std::is_same_v<To, uint8_t>) return (uint8_t)(x != 0);  // bool\n"
    "  else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) return tj_f2i<To, From>(x);\n"
    "  else return (To)x;  // int to int wraps (C++20), to float rounds\n}\n";

constexpr const char* kModHelpers =
    "template <class T> static inline T tj_imod(T a, T b, bool fmod) {\n"
    "  if (b == 0) { __atomic_store_n(&tj_status, 2, __ATOMIC_RELAXED); return 0; }\n"
    "  if constexpr (std::is_signed_v<T>) { if (b == -1) return 0; }\n"
    "  T r = (T)(a % b);\n"
    "  return !fmod && r != 0 && ((r < 0) != (b < 0)) ? (T)(r + b) : r;\n}\n"
    "template <class T> static inline T tj_fmod(T a, T b, bool fmod) {\n"
    "  T r = std::fmod(a, b);\n"
    "  if (fmod) return r;\n"
    "  if (r != 0) return (b < 0) != (r < 0) ? r + b : r;\n"
    "  return std::copysign((T)0, b);\n}\n";

}  // namespace

std::vector<OpDef> elementwise() {
  const std::vector<AttrSpec> none;
  auto unary = [&](Op op, const char* name, InferFn infer, ScalarFns f, CExprFn c, int flops = 1) {
    return OpDef{op, name, Cat::elementwise, 1, 1, none, infer, false, Fuse::pointwise, flops, nullptr, f, c};
  };
  auto binary = [&](Op op, const char* name, InferFn infer, bool commutative, ScalarFns f, CExprFn c) {
    return OpDef{op, name, Cat::elementwise, 2, 2, none, infer, commutative, Fuse::pointwise, 1, nullptr, f, c};
  };
  auto dividing = [](OpDef d) {
    d.int_divides = true;
    return d;
  };
  std::vector<OpDef> v = {
      unary(Op::neg, "neg", infer::numeric_unary, both<1>([](auto x) { return -x; }, [](I x) { return wrap_neg(x); }),
            C_INT_OR("tj_ineg<$T>($0)", "(-($0))")),
      unary(Op::exp, "exp", infer::float_unary, floats<1>([](auto x) { return std::exp(x); }), C_FORM("tj_exp(($T)($0))")),
      unary(Op::log, "log", infer::float_unary, floats<1>([](auto x) { return std::log(x); }), C_FORM("std::log($0)")),
      unary(Op::tanh, "tanh", infer::float_unary, floats<1>([](auto x) { return std::tanh(x); }), C_FORM("std::tanh($0)")),
      unary(Op::sqrt, "sqrt", infer::float_unary, floats<1>([](auto x) { return std::sqrt(x); }), C_FORM("std::sqrt($0)")),
      unary(Op::rsqrt, "rsqrt", infer::float_unary, floats<1>([](auto x) { return decltype(x)(1) / std::sqrt(x); }),
            C_FORM("(($T)1/std::sqrt($0))")),
      unary(Op::sin, "sin", infer::float_unary, floats<1>([](auto x) { return std::sin(x); }), C_FORM("std::sin($0)")),
      unary(Op::cos, "cos", infer::float_unary, floats<1>([](auto x) { return std::cos(x); }), C_FORM("std::cos($0)")),
      // abs(INT_MIN) wraps to INT_MIN.
      unary(Op::abs, "abs", infer::numeric_unary,
            both<1>([](auto x) { return std::abs(x); }, [](I x) { return x < 0 ? wrap_neg(x) : x; }),
            C_INT_OR("tj_iabs<$T>($0)", "std::abs($0)")),
      unary(Op::sigmoid, "sigmoid", infer::float_unary,
            floats<1>([](auto x) { return decltype(x)(1) / (decltype(x)(1) + std::exp(-x)); }),
            C_FORM("(($T)1/(($T)1+tj_exp(($T)(-($0)))))")),
      unary(Op::recip, "recip", infer::float_unary, floats<1>([](auto x) { return decltype(x)(1) / x; }), C_FORM("(($T)1/($0))")),
      // saturate: a float8 result beyond the format's range is its largest
      // value (true, ONNX's default) or infinity/NaN (false).
      {Op::cast, "cast", Cat::elementwise, 1, 1, {{"to", AK::DTypeK, std::nullopt}, {"saturate", AK::Bool, AttrValue(true)}}, infer_cast,
       false, Fuse::pointwise, 0, nullptr, {}, C_FORM("tj_cast<$T, $S>($0)"), kCastHelpers},
      unary(Op::erf, "erf", infer::float_unary, floats<1>([](auto x) { return std::erf(x); }), C_FORM("std::erf($0)")),
      unary(Op::floor, "floor", infer::float_unary, floats<1>([](auto x) { return std::floor(x); }), C_FORM("std::floor($0)")),
      unary(Op::ceil, "ceil", infer::float_unary, floats<1>([](auto x) { return std::ceil(x); }), C_FORM("std::ceil($0)")),
      // Halves to even (numpy, torch, ONNX): the default rounding mode.
      unary(Op::round, "round", infer::float_unary, floats<1>([](auto x) { return std::nearbyint(x); }),
            C_FORM("std::nearbyint($0)")),
      // -1, 0 or 1; a float zero keeps its sign and NaN stays NaN.
      unary(Op::sign, "sign", infer::numeric_unary,
            both<1>([](auto x) { return x > 0 ? decltype(x)(1) : x < 0 ? decltype(x)(-1) : x; }, [](I x) { return I(x > 0) - I(x < 0); }),
            C_INT_OR("(($T)(($0) > 0) - ($T)(($0) < 0))", "(($0) > 0 ? ($T)1 : ($0) < 0 ? ($T)-1 : ($0))")),
      unary(Op::log1p, "log1p", infer::float_unary, floats<1>([](auto x) { return std::log1p(x); }), C_FORM("std::log1p($0)")),
      unary(Op::expm1, "expm1", infer::float_unary, floats<1>([](auto x) { return std::expm1(x); }), C_FORM("std::expm1($0)")),
      // max(x, 0): NaN stays NaN, -0 becomes +0.
      unary(Op::relu, "relu", infer::numeric_unary,
            both<1>([](auto x) { return ieee_max(x, decltype(x)(0)); }, [](I x) { return std::max<I>(x, 0); }),
            C_INT_OR("std::max<$T>($0, 0)", "tj_max<$T>($0, ($T)0)")),
      // log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|)).
      unary(Op::softplus, "softplus", infer::float_unary,
            floats<1>([](auto x) { return ieee_max(x, decltype(x)(0)) + std::log1p(std::exp(-std::abs(x))); }),
            C_FORM("(tj_max<$T>($0, ($T)0) + std::log1p(tj_exp(($T)(-std::abs($0)))))"), 4),
      {Op::leaky_relu, "leaky_relu", Cat::elementwise, 1, 1, {{"alpha", AK::Float, AttrValue(0.01)}}, infer::float_unary, false,
       Fuse::pointwise, 2, nullptr, floats<1>([](auto x, K k) { return x < 0 ? decltype(x)(k[0]) * x : x; }),
       [](const CExpr& e) { return e.fmt("(($0) < 0 ? " + e.lit(e.k[0]) + "*($0) : ($0))"); }},
      // x * relu6(x + 3) / 6, as torch computes it.
      unary(Op::hardswish, "hardswish", infer::float_unary, floats<1>([](auto x) {
              using E = decltype(x);
              return x * std::min(std::max(x + E(3), E(0)), E(6)) / E(6);
            }),
            C_FORM("(($0) * std::min<$T>(std::max<$T>(($0) + ($T)3, ($T)0), ($T)6) / ($T)6)"), 4),

      binary(Op::add, "add", infer::binary, true, both<2>([](auto a, auto b) { return a + b; }, [](I a, I b) { return wrap_add(a, b); }),
             C_INT_OR("tj_iadd<$T>($0, $1)", "($0+$1)")),
      binary(Op::sub, "sub", infer::binary, false, both<2>([](auto a, auto b) { return a - b; }, [](I a, I b) { return wrap_sub(a, b); }),
             C_INT_OR("tj_isub<$T>($0, $1)", "($0-$1)")),
      binary(Op::mul, "mul", infer::binary, true, both<2>([](auto a, auto b) { return a * b; }, [](I a, I b) { return wrap_mul(a, b); }),
             C_INT_OR("tj_imul<$T>($0, $1)", "($0*$1)")),
      dividing(binary(Op::div, "div", infer::binary, false,
                      both<2>([](auto a, auto b) { return a / b; }, [](I a, I b) { return int_div(a, b); }),
                      C_INT_OR("tj_idiv<$T>($0, $1)", "($0/$1)"))),
      binary(Op::max, "max", infer::binary, true,
             both<2>([](auto a, auto b) { return ieee_max(a, b); }, [](I a, I b) { return std::max(a, b); }),
             C_INT_OR("std::max<$T>($0, $1)", "tj_max<$T>($0, $1)")),
      binary(Op::min, "min", infer::binary, true,
             both<2>([](auto a, auto b) { return ieee_min(a, b); }, [](I a, I b) { return std::min(a, b); }),
             C_INT_OR("std::min<$T>($0, $1)", "tj_min<$T>($0, $1)")),
      binary(Op::pow, "pow", infer::float_binary, false, floats<2>([](auto a, auto b) { return std::pow(a, b); }),
             C_FORM("std::pow($0, $1)")),
      dividing({Op::mod, "mod", Cat::elementwise, 2, 2, {{"fmod", AK::Bool, AttrValue(false)}}, infer::binary, false, Fuse::pointwise, 2,
                nullptr,
                both<2>([](auto a, auto b, K k) { return float_mod(a, b, k[0] != 0); }, [](I a, I b, K k) { return int_mod(a, b, k[0] != 0); }),
                [](const CExpr& e) {
                  return e.fmt(std::string(e.integer ? "tj_imod" : "tj_fmod") + "<$T>($0, $1, " + (e.k[0] != 0 ? "true" : "false") + ")");
                },
                kModHelpers}),

      binary(Op::eq, "eq", infer::compare, true, any<2>([](auto a, auto b) { return a == b; }), C_FORM("(uint8_t)($0==$1)")),
      binary(Op::ne, "ne", infer::compare, true, any<2>([](auto a, auto b) { return a != b; }), C_FORM("(uint8_t)($0!=$1)")),
      binary(Op::lt, "lt", infer::compare, false, any<2>([](auto a, auto b) { return a < b; }), C_FORM("(uint8_t)($0<$1)")),
      binary(Op::le, "le", infer::compare, false, any<2>([](auto a, auto b) { return a <= b; }), C_FORM("(uint8_t)($0<=$1)")),
      binary(Op::gt, "gt", infer::compare, false, any<2>([](auto a, auto b) { return a > b; }), C_FORM("(uint8_t)($0>$1)")),
      binary(Op::ge, "ge", infer::compare, false, any<2>([](auto a, auto b) { return a >= b; }), C_FORM("(uint8_t)($0>=$1)")),
      binary(Op::logical_and, "and", infer::logical, true, ints<2>([](I a, I b) { return a != 0 && b != 0; }),
             C_FORM("(uint8_t)((($0) != 0) & (($1) != 0))")),
      binary(Op::logical_or, "or", infer::logical, true, ints<2>([](I a, I b) { return a != 0 || b != 0; }),
             C_FORM("(uint8_t)((($0) != 0) | (($1) != 0))")),
      unary(Op::logical_not, "not", infer::logical, ints<1>([](I x) { return x == 0; }), C_FORM("(uint8_t)(($0) == 0)")),
      // Both branches are evaluated, as in generated code (an index out of
      // range in either is an error), which selects with a blend.
      {Op::where, "where", Cat::elementwise, 3, 3, none, infer_where, false, Fuse::pointwise, 1, nullptr,
       any<3>([](auto c, auto a, auto b) { return c != 0 ? a : b; }), C_FORM("tj_select<$T>($0, $1, $2)")},
      // min(max(x, lo), hi): NaN propagates; lo > hi gives hi (torch.clamp, ONNX Clip).
      {Op::clip, "clip", Cat::elementwise, 3, 3, none, infer::binary, false, Fuse::pointwise, 2, nullptr,
       both<3>([](auto x, auto lo, auto hi) { return ieee_min(ieee_max(x, lo), hi); }, [](I x, I lo, I hi) { return std::min(std::max(x, lo), hi); }),
       C_INT_OR("std::min<$T>(std::max<$T>($0, $1), $2)", "tj_min<$T>(tj_max<$T>($0, $1), $2)")},
  };
  return v;
}

#undef C_FORM
#undef C_INT_OR

}  // namespace tj::rows
