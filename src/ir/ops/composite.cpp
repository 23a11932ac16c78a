// Composite op rows: each has a decomposition into primitives (the
// decompose pass) and is also kept whole where a kernel does better with it:
// softmax and the norms as row kernels, silu and gelu as pointwise
// expressions. Each expansion evaluates in the same order as the
// interpreter's kernel, so in f64 the result is bit-identical; in f32 the
// kernels' double intermediates differ from f32 primitives by an ulp or so.
#include <cmath>

#include "ir/decomposer.h"
#include "ir/differ.h"
#include "ir/factors.h"
#include "ir/ops/infer.h"
#include "ir/ops/rows.h"

namespace tj::rows {

namespace {

using AK = AttrKind;
using Cat = OpCategory;
using K = ScalarAttrs;

Type infer_softmax(InferCtx& c) {
  infer::require_float(c, 0);
  auto& axis = c.attr<int64_t>("axis");
  axis = c.axis(axis, c.rank(0));
  return c.in[0];
}

Type infer_norm(InferCtx& c) {
  infer::require_float(c, 0);
  infer::require_same_dtype(c);
  if (c.rank(0) < 1) c.fail("normalization needs rank >= 1");
  for (size_t i = 1; i < c.in.size(); ++i)
    if (c.rank(i) != 1 || c.in[i].shape[0] != c.in[0].shape.back())
      c.fail("scale/bias " + c.in[i].str() + " does not match the last dimension of " + c.in[0].str());
  return c.in[0];
}

// softmax(x) -> e = exp(x - amax(x)); e / sum(e)
ValueId decompose_softmax(Decomposer& d) {
  int64_t axis = d.n.attr_int("axis");
  ValueId x = d.in[0];
  ValueId e = d.op(Op::exp, {d.op(Op::sub, {x, d.reduce(Op::amax, x, axis)})});
  return d.op(Op::div, {e, d.reduce(Op::sum, e, axis)});
}

// rms_norm(x, w) -> x * rsqrt(mean(x*x) + eps) * w
ValueId decompose_rms_norm(Decomposer& d) {
  ValueId x = d.in[0];
  ValueId ms = d.reduce(Op::mean, d.op(Op::mul, {x, x}), d.n.type.rank() - 1);
  ValueId r = d.op(Op::rsqrt, {d.op(Op::add, {ms, d.c(d.n.attr_float("eps"))})});
  return d.op(Op::mul, {d.op(Op::mul, {x, r}), d.in[1]});
}

// layer_norm(x, w, b) -> c = x - mean(x); c * rsqrt(mean(c*c) + eps) * w + b
ValueId decompose_layer_norm(Decomposer& d) {
  int64_t last = d.n.type.rank() - 1;
  ValueId x = d.in[0];
  ValueId c = d.op(Op::sub, {x, d.reduce(Op::mean, x, last)});
  ValueId var = d.reduce(Op::mean, d.op(Op::mul, {c, c}), last);
  ValueId r = d.op(Op::rsqrt, {d.op(Op::add, {var, d.c(d.n.attr_float("eps"))})});
  return d.op(Op::add, {d.op(Op::mul, {d.op(Op::mul, {c, r}), d.in[1]}), d.in[2]});
}

// silu(x) -> x / (1 + exp(-x))
ValueId decompose_silu(Decomposer& d) {
  ValueId x = d.in[0];
  return d.op(Op::div, {x, d.op(Op::add, {d.c(1.0), d.op(Op::exp, {d.op(Op::neg, {x})})})});
}

// gelu, approximate: 0.5*x * (1 + tanh(sqrt(2/pi) * (x + ((0.044715*x)*x)*x)))
// gelu, exact:       0.5*x * (1 + erf(x * sqrt(1/2)))
// The kernels compute in double, whatever the dtype.
inline double sqrt_2_over_pi() { return std::sqrt(2.0 / M_PI); }
constexpr double kSqrtHalf = M_SQRT1_2;

template <class E>
E gelu(E x, K k) {
  double xd = x;
  if (k[0] != 0) return static_cast<E>(0.5 * xd * (1.0 + std::tanh(sqrt_2_over_pi() * (xd + 0.044715 * xd * xd * xd))));
  return static_cast<E>(0.5 * xd * (1.0 + std::erf(xd * kSqrtHalf)));
}

std::string gelu_c(const CExpr& e) {
  CExpr d;  // literals in double
  d.T = "double";
  if (e.k[0] != 0)
    return "([](double x){ return 0.5*x*(1.0+std::tanh(" + d.lit(sqrt_2_over_pi()) + "*(x+0.044715*x*x*x))); }((double)(" + e.a[0] + ")))";
  return "([](double x){ return 0.5*x*(1.0+std::erf(x*" + d.lit(kSqrtHalf) + ")); }((double)(" + e.a[0] + ")))";
}

// In GPU C: helpers of the GPU prelude (codegen/gpu/prelude.cpp), given the constant.
std::string gelu_gpu(const CExpr& e) {
  CExpr d;
  d.T = "double";
  if (e.k[0] != 0) return "tj_gelu_tanh((double)(" + e.a[0] + "), " + d.lit(sqrt_2_over_pi()) + ")";
  return "tj_gelu_erf((double)(" + e.a[0] + "), " + d.lit(kSqrtHalf) + ")";
}

ValueId decompose_gelu(Decomposer& d) {
  ValueId x = d.in[0];
  ValueId inner;
  if (d.n.attr_bool("approximate")) {
    ValueId cube = d.op(Op::mul, {d.op(Op::mul, {d.op(Op::mul, {d.c(0.044715), x}), x}), x});
    ValueId u = d.op(Op::mul, {d.c(sqrt_2_over_pi()), d.op(Op::add, {x, cube})});
    inner = d.op(Op::tanh, {u});
  } else {
    inner = d.op(Op::erf, {d.op(Op::mul, {x, d.c(kSqrtHalf)})});
  }
  ValueId v = d.op(Op::add, {d.c(1.0), inner});
  return d.op(Op::mul, {d.op(Op::mul, {d.c(0.5), x}), v});
}

// Derivative rules (ir/differ.h), on the whole ops (not their expansions):
// the norms' backward reads the per-row statistic, not the normalized row.

// dx = y (dy - sum(dy y))
void d_softmax(Differ& d) {
  int64_t axis = d.n.attr_int("axis");
  d.give(0, d.mul(d.y, d.sub(d.dy, d.reduce(Op::sum, d.mul(d.dy, d.y), {axis}))));
}

// The per-row statistics of the norms, recomputed from x: r = rsqrt(mean(c^2)
// + eps) with c = x (rms_norm) or x - mean(x) (layer_norm); n = c r.
struct NormRows {
  ValueId n, r;
};
NormRows norm_rows(Differ& d, bool centered) {
  const int64_t last = d.n.type.rank() - 1;
  ValueId c = d.x(0);
  if (centered) c = d.sub(c, d.reduce(Op::mean, c, {last}));
  ValueId r = d.op(Op::rsqrt, {d.add(d.reduce(Op::mean, d.mul(c, c), {last}), d.c(d.n.attr_float("eps")))});
  return {d.mul(c, r), r};
}

// y = n w (+ b). dw = sum over rows of dy n, db = sum of dy; with dn = dy w,
// dx = r (dn - n mean(dn n)) for rms_norm, and r (dn - mean(dn) - n mean(dn n))
// for layer_norm.
void d_norm(Differ& d, bool centered) {
  const int64_t last = d.n.type.rank() - 1;
  NormRows s = norm_rows(d, centered);
  if (d.wants(1)) d.give(1, d.mul(d.dy, s.n));  // give sums the rows (w broadcasts along them)
  if (centered && d.wants(2)) d.give(2, d.dy);
  if (!d.wants(0)) return;
  ValueId dn = d.mul(d.dy, d.x(1));
  ValueId inner = d.sub(dn, d.mul(s.n, d.reduce(Op::mean, d.mul(dn, s.n), {last})));
  if (centered) inner = d.sub(inner, d.reduce(Op::mean, dn, {last}));
  d.give(0, d.mul(s.r, inner));
}
void d_rms_norm(Differ& d) { d_norm(d, false); }
void d_layer_norm(Differ& d) { d_norm(d, true); }

// s = sigmoid(x): dx = dy s (1 + x (1 - s))
void d_silu(Differ& d) {
  ValueId x = d.x(0);
  ValueId s = d.op(Op::sigmoid, {x});
  d.give(0, d.mul(d.dy, d.mul(s, d.add(d.c(1), d.mul(x, d.sub(d.c(1), s))))));
}

// exact: Phi(x) + x phi(x) = 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi)
// tanh: u = sqrt(2/pi) (x + 0.044715 x^3), t = tanh u:
//       0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
void d_gelu(Differ& d) {
  ValueId x = d.x(0);
  ValueId x2 = d.mul(x, x);
  ValueId slope;
  if (d.n.attr_bool("approximate")) {
    ValueId u = d.mul(d.c(sqrt_2_over_pi()), d.add(x, d.mul(d.c(0.044715), d.mul(x2, x))));
    ValueId t = d.op(Op::tanh, {u});
    ValueId du = d.mul(d.c(sqrt_2_over_pi()), d.add(d.c(1), d.mul(d.c(3 * 0.044715), x2)));
    slope = d.add(d.mul(d.c(0.5), d.add(d.c(1), t)), d.mul(d.mul(d.c(0.5), x), d.mul(d.sub(d.c(1), d.mul(t, t)), du)));
  } else {
    ValueId cdf = d.mul(d.c(0.5), d.add(d.c(1), d.op(Op::erf, {d.mul(x, d.c(kSqrtHalf))})));
    ValueId pdf = d.mul(d.c(0.5 * M_2_SQRTPI * kSqrtHalf), d.op(Op::exp, {d.mul(d.c(-0.5), x2)}));
    slope = d.add(cdf, d.mul(x, pdf));
  }
  d.give(0, d.mul(d.dy, slope));
}

}  // namespace

// The row kernels' forms (OpDef::row_form): statistics in double, as the
// reference kernels compute them.
// softmax: the row's max, the sum of exp(x - max), then each exp over the sum.
const RowForm kSoftmaxRow{{
    {.stat = "m", .reduce = RowReduce::max, .term = "$x"},
    {.stat = "s", .reduce = RowReduce::sum, .term = "exp($x - m)", .store = "$t"},
    {.store = "$y / s"},
}};
// rms_norm: x / sqrt(mean(x^2) + eps) * w.
const RowForm kRmsNormRow{{
    {.stat = "ss", .reduce = RowReduce::sum, .term = "$x * $x", .after = "const double inv = 1.0 / sqrt(ss / $D + $eps);"},
    {.store = "$x * inv * $w"},
}};
// layer_norm: (x - mean) / sqrt(variance + eps) * w + b.
const RowForm kLayerNormRow{{
    {.stat = "mu", .reduce = RowReduce::sum, .term = "$x", .after = "mu /= $D;"},
    {.stat = "var", .reduce = RowReduce::sum, .term = "($x - mu) * ($x - mu)", .after = "const double inv = 1.0 / sqrt(var / $D + $eps);"},
    {.store = "($x - mu) * inv * $w + $b"},
}};

std::vector<OpDef> composite() {
  const AttrSpec eps{"eps", AK::Float, AttrValue(1e-5)};
  return {
      {.op = Op::softmax, .name = "softmax", .category = Cat::composite, .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"axis", AK::Int, AttrValue(int64_t{-1})}}, .infer = infer_softmax,
       .fuse = Fuse::rowwise, .flops = 5,
       .row_form = &kSoftmaxRow, .decompose = decompose_softmax, .grad = d_softmax, .factors = axis_factors},
      {.op = Op::rms_norm, .name = "rms_norm", .category = Cat::composite, .min_inputs = 2, .max_inputs = 2, .attrs = {eps}, .infer = infer_norm,
       .fuse = Fuse::rowwise, .flops = 4,
       .row_form = &kRmsNormRow, .decompose = decompose_rms_norm, .grad = d_rms_norm, .factors = last_axis_factors},
      {.op = Op::layer_norm, .name = "layer_norm", .category = Cat::composite, .min_inputs = 3, .max_inputs = 3, .attrs = {eps}, .infer = infer_norm,
       .fuse = Fuse::rowwise, .flops = 8,
       .row_form = &kLayerNormRow, .decompose = decompose_layer_norm, .grad = d_layer_norm, .factors = last_axis_factors},
      {.op = Op::silu, .name = "silu", .category = Cat::composite, .min_inputs = 1, .max_inputs = 1, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .flops = 4,
       .scalar = floats<1>([](auto x) { return x / (decltype(x)(1) + std::exp(-x)); }),
       .c_expr = [](const CExpr& e) { return e.fmt("tj_silu(($T)($0))"); },
       .gpu_expr = [](const CExpr& e) { return e.fmt("(($0)/(($T)1+exp(($T)(-($0)))))"); },
       .decompose = decompose_silu, .grad = d_silu},
      {.op = Op::gelu, .name = "gelu", .category = Cat::composite, .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"approximate", AK::Bool, AttrValue(true)}}, .infer = infer::float_unary,
       .fuse = Fuse::pointwise, .flops = 8,
       .scalar = floats<1>([](auto x, K k) { return gelu(x, k); }), .c_expr = gelu_c, .gpu_expr = gelu_gpu,
       .decompose = decompose_gelu, .grad = d_gelu},
  };
}

}  // namespace tj::rows
