// ONNX converters: elementwise math, comparisons, activations, reductions
// and softmax, as the ONNX spec defines each at opset 13 and later. Ops the
// IR has no row for are written as the compositions the spec gives for them
// (its function bodies: HardSigmoid, Elu, LogSoftmax, ReduceL2, ...).
#include <cmath>
#include <limits>
#include <optional>

#include "frontend/onnx/context.h"

namespace tj::onnx_import {

namespace {

template <Tensor (*F)(const Tensor&)>
R unary(Ctx& c) {
  return {v(F(c.in(0)))};
}
template <Tensor (*F)(const Tensor&, const Tensor&)>
R binary(Ctx& c) {
  return {v(F(c.in(0), c.in(1)))};
}

// u64 is held as an int64's bits, and the IR's ordering ops refuse it:
// ordered as i64 with the top bit flipped (x + 2^63, wrapping), which keeps
// the unsigned order.
Tensor biased(const Tensor& x) { return cast(x, DType::i64) + -9223372036854775808.0; }
bool is_u64(const Tensor& a, const Tensor& b) { return a.dtype() == DType::u64 || b.dtype() == DType::u64; }
template <Tensor (*F)(const Tensor&, const Tensor&)>
Tensor ordered(const Tensor& a, const Tensor& b) {
  return is_u64(a, b) ? F(biased(a), biased(b)) : F(a, b);
}
Tensor maximum_(const Tensor& a, const Tensor& b) { return is_u64(a, b) ? where(lt(biased(a), biased(b)), b, a) : maximum(a, b); }
Tensor minimum_(const Tensor& a, const Tensor& b) { return is_u64(a, b) ? where(lt(biased(b), biased(a)), b, a) : minimum(a, b); }

Tensor add(const Tensor& a, const Tensor& b) { return a + b; }
Tensor sub(const Tensor& a, const Tensor& b) { return a - b; }
Tensor mul(const Tensor& a, const Tensor& b) { return a * b; }
Tensor div(const Tensor& a, const Tensor& b) { return a / b; }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor is_nan(const Tensor& x) { return ne(x, x); }
Tensor softsign(const Tensor& x) { return x / (abs(x) + 1.0); }
Tensor mish(const Tensor& x) { return x * tanh(softplus(x)); }
Tensor prelu(const Tensor& x, const Tensor& slope) { return where(x < 0.0, x * slope, x); }

// Max, Min, Sum, Mean: variadic, broadcasting.
template <Tensor (*F)(const Tensor&, const Tensor&)>
R fold(Ctx& c) {
  Tensor r = c.in(0);
  for (int i = 1; i < c.node->input_size(); ++i) r = F(r, c.in(static_cast<size_t>(i)));
  return {v(r)};
}

R mean_(Ctx& c) {
  Tensor r = fold<add>(c)[0].t;
  return {v(r / static_cast<double>(c.node->input_size()))};
}

// The exponent takes the base's dtype; an integer base is raised in f64 and
// the result truncated back, as the spec's integer Pow.
R pow_(Ctx& c) {
  Tensor a = c.in(0), b = c.in(1);
  if (is_float(a.dtype()) && c.input(1).known && c.input(1).known->numel() == 1 && b.rank() <= a.rank())
    return {v(pow(a, c.input(1).known->get(0)))};  // a constant exponent: products where ATen and ORT use them
  if (is_float(a.dtype())) return {v(pow(a, b.dtype() == a.dtype() ? b : cast(b, a.dtype())))};
  return {v(cast(pow(cast(a, DType::f64), cast(b, DType::f64)), a.dtype()))};
}

R is_inf(Ctx& c) {
  Tensor x = c.in(0);
  bool pos = c.attr_int("detect_positive", 1) != 0, neg_ = c.attr_int("detect_negative", 1) != 0;
  Tensor p = eq(x, c.scalar(INFINITY, x.dtype())), n = eq(x, c.scalar(-INFINITY, x.dtype()));
  if (pos && neg_) return {v(logical_or(p, n))};
  if (pos) return {v(p)};
  if (neg_) return {v(n)};
  return {v(logical_and(p, n))};  // neither: all false
}

R hard_sigmoid(Ctx& c) {
  Tensor x = c.in(0);
  return {v(clip(x * c.attr_float("alpha", 0.2) + c.attr_float("beta", 0.5), 0.0, 1.0))};
}
R swish(Ctx& c) {
  Tensor x = c.in(0);
  return {v(x * sigmoid(x * c.attr_float("alpha", 1.0)))};
}
R elu(Ctx& c) {
  Tensor x = c.in(0);
  return {v(where(x < 0.0, expm1(x) * c.attr_float("alpha", 1.0), x))};
}
R selu(Ctx& c) {
  Tensor x = c.in(0);
  double alpha = c.attr_float("alpha", 1.67326319217681884765625), gamma = c.attr_float("gamma", 1.05070102214813232421875);
  return {v(where(x > 0.0, x, expm1(x) * alpha) * gamma)};
}
R celu(Ctx& c) {
  Tensor x = c.in(0);
  double alpha = c.attr_float("alpha", 1.0);
  return {v(maximum(x, 0.0) + minimum(expm1(x / alpha) * alpha, 0.0))};
}
R thresholded_relu(Ctx& c) {
  Tensor x = c.in(0);
  return {v(where(x > c.attr_float("alpha", 1.0), x, 0.0))};
}
R leaky_relu_(Ctx& c) { return {v(leaky_relu(c.in(0), c.attr_float("alpha", 0.01)))}; }

// approximate="tanh" or "none" (the default: the erf form).
R gelu_(Ctx& c) {
  const auto* a = c.attr("approximate");
  return {v(gelu(c.in(0), a && a->s() == "tanh"))};
}

R mod_(Ctx& c) { return {v(mod(c.in(0), c.in(1), c.attr_int("fmod", 0) != 0))}; }
R where_(Ctx& c) { return {v(where(c.in(0), c.in(1), c.in(2)))}; }

// min and max are optional operands (absent: unbounded).
R clip_(Ctx& c) {
  Tensor x = c.in(0);
  double lo = -INFINITY, hi = INFINITY;
  if (is_int(x.dtype())) lo = int_min(x.dtype()), hi = int_max(x.dtype());
  return {v(clip(x, c.has_input(1) ? c.in(1) : c.scalar(lo, x.dtype()), c.has_input(2) ? c.in(2) : c.scalar(hi, x.dtype())))};
}

// ---- reductions ------------------------------------------------------------

// Axes: an operand from opset 13 (ReduceSum) or 18 (the others), an
// attribute before. Empty axes reduce every axis, unless noop_with_empty_axes.
struct Reduction {
  Tensor x;
  std::vector<int64_t> axes;
  bool keep = true, noop = false;
};

Reduction reduction(Ctx& c, bool axes_operand_at_13) {
  Reduction r{c.in(0), {}, c.attr_int("keepdims", 1) != 0, false};
  bool operand = axes_operand_at_13 || c.opset >= 18;
  r.axes = operand ? (c.has_input(1) ? c.known_ints(1, "the axes") : std::vector<int64_t>{}) : c.attr_ints("axes", {});
  if (r.axes.empty()) {
    if (c.attr_int("noop_with_empty_axes", 0)) r.noop = true;
    for (int64_t i = 0; i < r.x.rank(); ++i) r.axes.push_back(i);
  }
  for (int64_t& a : r.axes) a = axis_of(c, a, r.x.rank());
  return r;
}

// An order-reversing map: -x for floats, -1 - x (~x) for integers, which
// unlike -x cannot overflow.
Tensor reversed(const Tensor& x) { return is_float(x.dtype()) ? neg(x) : -1.0 - x; }
Tensor amin(const Tensor& x, std::vector<int64_t> axes, bool keep) { return reversed(amax(reversed(x), std::move(axes), keep)); }

// Each reduction as (what is summed or maximized) and (what is done after).
enum class Red { sum, mean, max, min, prod, l1, l2, sum_square, log_sum, log_sum_exp };

template <Red K, bool AxesAt13>
R reduce(Ctx& c) {
  Reduction r = reduction(c, AxesAt13);
  Tensor x = r.x;
  if (r.noop) {
    switch (K) {
      case Red::l1: return {v(abs(x))};
      case Red::sum_square: return {v(x * x)};
      case Red::l2: return {v(abs(x))};
      case Red::log_sum: return {v(log(x))};
      default: return {v(x)};
    }
  }
  auto& a = r.axes;
  switch (K) {
    case Red::sum: return {v(sum(x, a, r.keep))};
    case Red::mean: return {v(mean(x, a, r.keep))};
    case Red::max:
      if (x.dtype() == DType::boolean) return {v(cast(amax(cast(x, DType::i32), a, r.keep), DType::boolean))};
      return {v(amax(x, a, r.keep))};
    case Red::min:
      if (x.dtype() == DType::boolean) return {v(cast(amin(cast(x, DType::i32), a, r.keep), DType::boolean))};
      return {v(amin(x, a, r.keep))};
    case Red::prod: return {v(prod(x, a, r.keep))};
    case Red::l1: return {v(sum(abs(x), a, r.keep))};
    case Red::l2: return {v(is_float(x.dtype()) ? sqrt(sum(x * x, a, r.keep)) : cast(sqrt(cast(sum(x * x, a, r.keep), DType::f64)), x.dtype()))};
    case Red::sum_square: return {v(sum(x * x, a, r.keep))};
    case Red::log_sum: return {v(log(sum(x, a, r.keep)))};
    case Red::log_sum_exp: {
      // max-shifted; an empty reduction (max = -inf) is log(0) = -inf.
      Tensor m = amax(x, a, true);
      Tensor shift = where(eq(m, c.scalar(-INFINITY, x.dtype())), 0.0, m);
      Tensor s = log(sum(exp(x - shift), a, true)) + shift;
      return {v(r.keep ? s : squeeze(s, a))};
    }
  }
  return {};
}

// The first (or with select_last_index the last) index of the maximum of
// `key` along the axis. The last is the first of the reversed axis.
Tensor arg_best(Ctx& c, const Tensor& key, int64_t axis, bool keep) {
  if (!c.attr_int("select_last_index", 0)) return argmax(key, axis, keep);
  static_dim(c, key, axis, "select_last_index over a symbolic dim");
  Tensor flipped = flip(key, {axis});
  return static_cast<double>(*key.shape()[static_cast<size_t>(axis)].as_const() - 1) - argmax(flipped, axis, keep);
}

R argmax_(Ctx& c) {
  Tensor x = c.in(0);
  return {v(arg_best(c, x, axis_of(c, c.attr_int("axis", 0), x.rank()), c.attr_int("keepdims", 1) != 0))};
}

// The first index of the minimum: the first of the maximum of reversed(x).
R argmin_(Ctx& c) {
  Tensor x = c.in(0);
  return {v(arg_best(c, reversed(x), axis_of(c, c.attr_int("axis", 0), x.rank()), c.attr_int("keepdims", 1) != 0))};
}

// The k largest (or smallest) along the axis, sorted, ties to the lower
// index (u64: ordered as i64 with the top bit flipped).
R topk(Ctx& c) {
  Tensor x = c.in(0);
  int64_t axis = axis_of(c, c.attr_int("axis", -1), x.rank());
  std::vector<int64_t> ks = c.known_ints(1, "k");
  if (ks.size() != 1) c.fail("k must be one value");
  int64_t k = ks[0], n = static_dim(c, x, axis, "TopK over a symbolic dim");
  if (k < 0 || k > n) c.fail("k = " + std::to_string(k) + " for a dim of " + std::to_string(n));
  if (x.dtype() != DType::u64) {
    ValuesAndIndices r = tj::topk(x, k, axis, c.attr_int("largest", 1) != 0);
    return {v(r.values), v(r.indices)};
  }
  Tensor idx = tj::topk(biased(x), k, axis, c.attr_int("largest", 1) != 0).indices;
  return {v(take_along(x, idx, axis)), v(idx)};
}

R softmax_(Ctx& c) {
  Tensor x = c.in(0);
  return {v(softmax(x, axis_of(c, c.attr_int("axis", -1), x.rank())))};
}

R log_softmax(Ctx& c) {
  Tensor x = c.in(0);
  int64_t axis = axis_of(c, c.attr_int("axis", -1), x.rank());
  Tensor d = x - amax(x, {axis}, true);
  return {v(d - log(sum(exp(d), {axis}, true)))};
}

// 1 at the first maximum along the axis, 0 elsewhere.
R hardmax(Ctx& c) {
  Tensor x = c.in(0);
  int64_t axis = axis_of(c, c.attr_int("axis", -1), x.rank());
  Tensor idx = argmax(x, axis, true);
  Shape s(static_cast<size_t>(x.rank()), Dim(1));
  s[static_cast<size_t>(axis)] = x.shape()[static_cast<size_t>(axis)];
  Tensor pos = reshape(iota(x, x.shape()[static_cast<size_t>(axis)]), s);
  return {v(cast(eq(pos, idx), x.dtype()))};
}

// Reversed by flips; exclusive: each element's predecessors alone (a 1 first).
R cumprod_(Ctx& c) {
  Tensor x = c.in(0);
  if (x.rank() == 0) c.fail("CumProd of a scalar");
  std::vector<int64_t> ax = c.known_ints(1, "the axis");
  if (ax.size() != 1) c.fail("the axis must be one value");
  int64_t axis = axis_of(c, ax[0], x.rank());
  bool reverse = c.attr_int("reverse", 0) != 0;
  if (reverse) x = flip(x, {axis});
  if (c.attr_int("exclusive", 0)) {
    int64_t n = static_dim(c, x, axis, "an exclusive CumProd over a symbolic dim");
    std::vector<int64_t> b(static_cast<size_t>(x.rank()), 0), e = b;
    b[static_cast<size_t>(axis)] = 1, e[static_cast<size_t>(axis)] = -1;
    x = n == 0 ? x : pad(x, b, e, PadMode::constant, c.scalar(1, x.dtype()));
  }
  Tensor r = cumprod(x, axis);
  return {v(reverse ? flip(r, {axis}) : r)};
}

R shrink(Ctx& c) {
  Tensor x = c.in(0);
  double lambd = c.attr_float("lambd", 0.5), bias = c.attr_float("bias", 0.0);
  return {v(where(x < -lambd, x + bias, where(x > lambd, x - bias, c.scalar(0, x.dtype()))))};
}

R bit_shift(Ctx& c) {
  const auto* d = c.attr("direction");
  if (!d || (d->s() != "LEFT" && d->s() != "RIGHT")) c.fail("direction must be LEFT or RIGHT");
  Tensor a = c.in(0), b = c.in(1);
  if (d->s() == "LEFT") return {v(shift_left(a, b))};
  if (a.dtype() != DType::u64) return {v(shift_right(a, b))};
  // u64 (held as i64 bits, whose right shift is arithmetic): one step with
  // the top bit cleared after it, then the rest, in i64.
  Tensor ai = cast(a, DType::i64), bi = cast(b, DType::i64);
  Tensor one = c.scalar(1, DType::i64);
  Tensor top_clear = bitwise_not(shift_left(one, c.scalar(63, DType::i64)));
  Tensor rest = shift_right(bitwise_and(shift_right(ai, one), top_clear), bi - one);
  return {v(cast(where(eq(bi, c.scalar(0, DType::i64)), ai, rest), DType::u64))};
}

R cumsum_(Ctx& c) {
  Tensor x = c.in(0);
  if (x.rank() == 0) c.fail("CumSum of a scalar");
  if (x.dtype() == DType::boolean) c.fail("CumSum of bool (ONNX allows numbers only)");
  std::vector<int64_t> ax = c.known_ints(1, "the axis");
  if (ax.size() != 1) c.fail("the axis must be one value");
  return {v(cumsum(x, axis_of(c, ax[0], x.rank()), c.attr_int("exclusive", 0) != 0, c.attr_int("reverse", 0) != 0))};
}

}  // namespace

void add_math_ops(ConverterTable& t) {
  t.insert({
      {"Abs", unary<abs>}, {"Neg", unary<neg>}, {"Exp", unary<exp>}, {"Log", unary<log>}, {"Sqrt", unary<sqrt>},
      {"Reciprocal", unary<recip>}, {"Tanh", unary<tanh>}, {"Sigmoid", unary<sigmoid>}, {"Sin", unary<sin>}, {"Cos", unary<cos>},
      {"Tan", unary<tan>}, {"Sinh", unary<sinh>}, {"Cosh", unary<cosh>}, {"Asin", unary<asin>}, {"Acos", unary<acos>}, {"Atan", unary<atan>},
      {"Asinh", unary<asinh>}, {"Acosh", unary<acosh>}, {"Atanh", unary<atanh>},
      {"BitwiseAnd", binary<bitwise_and>}, {"BitwiseOr", binary<bitwise_or>}, {"BitwiseXor", binary<bitwise_xor>}, {"BitwiseNot", unary<bitwise_not>},
      {"Erf", unary<erf>}, {"Floor", unary<floor>}, {"Ceil", unary<ceil>}, {"Round", unary<round>}, {"Sign", unary<sign>},
      {"Relu", unary<relu>}, {"Softplus", unary<softplus>}, {"HardSwish", unary<hardswish>}, {"Softsign", unary<softsign>},
      {"Mish", unary<mish>}, {"Not", unary<logical_not>}, {"IsNaN", unary<is_nan>}, {"IsInf", is_inf},
      {"Gelu", gelu_}, {"HardSigmoid", hard_sigmoid}, {"Swish", swish}, {"Elu", elu}, {"Selu", selu}, {"Celu", celu},
      {"ThresholdedRelu", thresholded_relu}, {"LeakyRelu", leaky_relu_}, {"PRelu", binary<prelu>},
      {"Add", binary<add>}, {"Sub", binary<sub>}, {"Mul", binary<mul>}, {"Div", binary<div>}, {"Pow", pow_}, {"Mod", mod_},
      {"Equal", binary<eq>}, {"Less", binary<ordered<lt>>}, {"LessOrEqual", binary<ordered<le>>}, {"Greater", binary<ordered<gt>>},
      {"GreaterOrEqual", binary<ordered<ge>>}, {"And", binary<logical_and>}, {"Or", binary<logical_or>}, {"Xor", binary<logical_xor>},
      {"Max", fold<maximum_>}, {"Min", fold<minimum_>}, {"Sum", fold<add>}, {"Mean", mean_},
      {"Where", where_}, {"Clip", clip_},
      {"ReduceSum", reduce<Red::sum, true>}, {"ReduceMean", reduce<Red::mean, false>}, {"ReduceMax", reduce<Red::max, false>},
      {"ReduceMin", reduce<Red::min, false>}, {"ReduceProd", reduce<Red::prod, false>}, {"ReduceL1", reduce<Red::l1, false>}, {"ReduceL2", reduce<Red::l2, false>},
      {"ReduceSumSquare", reduce<Red::sum_square, false>}, {"ReduceLogSum", reduce<Red::log_sum, false>},
      {"ReduceLogSumExp", reduce<Red::log_sum_exp, false>},
      {"ArgMax", argmax_}, {"ArgMin", argmin_}, {"TopK", topk}, {"Softmax", softmax_}, {"LogSoftmax", log_softmax}, {"Hardmax", hardmax},
      {"CumSum", cumsum_}, {"CumProd", cumprod_}, {"Shrink", shrink}, {"BitShift", bit_shift},
  });
}

}  // namespace tj::onnx_import
