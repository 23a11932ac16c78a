// The reference interpreter against hand-computed values: every op on small
// tensors whose results are worked out by hand (or from an obvious closed
// form, written as a literal), in both compute modes. The interpreter defines
// the semantics every later stage is checked against, so these literals are
// the ground truth underneath all of it.
#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "ir/text.h"
#include "reference/interpreter.h"
#include "reference/random_inputs.h"
#include "tensorjit/error.h"
#include "tensorjit/ndarray.h"
#include "tensorjit/tensor.h"

namespace {

using tj::Dim;
using tj::DType;
using tj::NDArray;
using tj::Tensor;
using Vals = std::vector<double>;
using Ints = std::vector<int64_t>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Closed forms used below, to 17 significant digits.
constexpr double kE = 2.718281828459045;
constexpr double kLn2 = 0.6931471805599453;
constexpr double kLn3 = 1.0986122886681098;
constexpr double kLn5 = 1.6094379124341003;
constexpr double kLn10 = 2.302585092994046;
constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kPi = 3.141592653589793;

// Checks shape and values: NaN and infinities must match exactly, finite
// values to within `rel` relative error (so an expected 0 must be exact).
void expect_array(const NDArray& got, const Ints& shape, const Vals& want, double rel) {
  ASSERT_EQ(got.shape(), shape) << got.type_str();
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << got.type_str();
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got.get(static_cast<int64_t>(i));
    double w = want[i];
    if (std::isnan(w)) EXPECT_TRUE(std::isnan(g)) << "element " << i << ": got " << g << ", want NaN";
    else if (std::isinf(w)) EXPECT_EQ(g, w) << "element " << i;
    else EXPECT_NEAR(g, w, rel * std::abs(w)) << "element " << i;
  }
}

void expect_dtype(const NDArray& got, DType want) { EXPECT_EQ(tj::dtype_name(got.dtype()), tj::dtype_name(want)); }

// Integer and bool results are held exactly.
void expect_exact(const NDArray& got, DType dtype, const Ints& shape, const Vals& want) {
  expect_dtype(got, dtype);
  expect_array(got, shape, want, 0.0);
}

// Expects `f` to throw tj::Error whose message contains every one of `parts`.
template <class F>
void expect_error(F f, std::initializer_list<std::string_view> parts) {
  try {
    f();
  } catch (const tj::Error& e) {
    std::string msg = e.what();
    for (std::string_view p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    return;
  }
  ADD_FAILURE() << "expected a tj::Error";
}

NDArray i64s(Ints shape, const Vals& v) { return NDArray::from(DType::i64, std::move(shape), v); }

// Each test runs in both compute modes; graphs are declared in the compute
// dtype, so f64 runs see exact double inputs.
class InterpOps : public ::testing::TestWithParam<DType> {
 protected:
  DType dt() const { return GetParam(); }
  double tol() const { return GetParam() == DType::f64 ? 1e-12 : 1e-6; }
  NDArray arr(Ints shape, const Vals& v) const { return NDArray::from(dt(), std::move(shape), v); }
  std::vector<NDArray> run(const tj::Graph& g, const tj::Bindings& b = {}) const {
    return tj::interpret(g, b, tj::InterpretOptions{dt()});
  }
  // A floating result comes back in the compute dtype.
  void expect_float(const NDArray& got, const Ints& shape, const Vals& want) const {
    expect_dtype(got, dt());
    expect_array(got, shape, want, tol());
  }
  // Runs f(x) for a 1-D input x and checks the result.
  template <class F>
  void check_unary(F f, const Vals& x, const Vals& want) {
    tj::Tracer t("unary");
    int64_t n = static_cast<int64_t>(x.size());
    Tensor in = t.input("x", dt(), {n});
    tj::Graph g = t.finish({f(in)});
    auto out = run(g, {{"x", arr({n}, x)}});
    ASSERT_EQ(out.size(), 1u);
    expect_float(out[0], {n}, want);
  }
};

INSTANTIATE_TEST_SUITE_P(Interp, InterpOps, ::testing::Values(DType::f32, DType::f64),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(tj::dtype_name(i.param)); });

// ---- sources -----------------------------------------------------------------

TEST_P(InterpOps, Constant) {
  tj::Tracer t;
  Tensor full = t.constant(dt(), {2, 2}, {1, 2, 3, 4});
  Tensor splat = t.constant(dt(), {2, 3}, {7.5});
  Tensor scalar = t.scalar(-2.5, dt());
  Tensor ints = t.constant(DType::i64, {3}, {-1, 0, 5});
  Tensor int_splat = t.constant(DType::i32, {2}, {9});
  Tensor bools = t.constant(DType::boolean, {3}, {1, 0, 1});
  auto out = run(t.finish({full, splat, scalar, ints, int_splat, bools}));
  expect_float(out[0], {2, 2}, {1, 2, 3, 4});
  expect_float(out[1], {2, 3}, {7.5, 7.5, 7.5, 7.5, 7.5, 7.5});
  expect_float(out[2], {}, {-2.5});
  expect_exact(out[3], DType::i64, {3}, {-1, 0, 5});
  expect_exact(out[4], DType::i32, {2}, {9, 9});
  expect_exact(out[5], DType::boolean, {3}, {1, 0, 1});
}

TEST_P(InterpOps, Iota) {
  tj::Tracer t;
  Tensor a = tj::iota(t, 5);
  Tensor b = tj::iota(t, 4, dt());
  Tensor c = tj::iota(t, 3, DType::i32);
  Tensor empty = tj::iota(t, 0);
  auto out = run(t.finish({a, b, c, empty}));
  expect_exact(out[0], DType::i64, {5}, {0, 1, 2, 3, 4});
  expect_float(out[1], {4}, {0, 1, 2, 3});
  expect_exact(out[2], DType::i32, {3}, {0, 1, 2});
  expect_exact(out[3], DType::i64, {0}, {});
}

// ---- unary elementwise -------------------------------------------------------

TEST_P(InterpOps, Neg) {
  check_unary([](const Tensor& x) { return tj::neg(x); }, {1, -2.5, 0, 3}, {-1, 2.5, 0, -3});
  check_unary([](const Tensor& x) { return -x; }, {4, -0.25}, {-4, 0.25});
}

TEST_P(InterpOps, Exp) {
  check_unary([](const Tensor& x) { return tj::exp(x); }, {0, 1, -1, 2, -kInf},
              {1, kE, 0.36787944117144233, 7.38905609893065, 0});
}

TEST_P(InterpOps, Log) {
  check_unary([](const Tensor& x) { return tj::log(x); }, {1, 2, 0.5, 10, 0, -1}, {0, kLn2, -kLn2, kLn10, -kInf, kNaN});
}

TEST_P(InterpOps, Tanh) {
  check_unary([](const Tensor& x) { return tj::tanh(x); }, {0, 0.5, -1, 20},
              {0, 0.46211715726000974, -0.7615941559557649, 1});
}

TEST_P(InterpOps, Sqrt) {
  check_unary([](const Tensor& x) { return tj::sqrt(x); }, {0, 1, 4, 2, 0.25, -1}, {0, 1, 2, kSqrt2, 0.5, kNaN});
}

TEST_P(InterpOps, Rsqrt) {
  check_unary([](const Tensor& x) { return tj::rsqrt(x); }, {1, 4, 0.25, 2, 0}, {1, 0.5, 2, 0.7071067811865476, kInf});
}

TEST_P(InterpOps, Sin) {
  check_unary([](const Tensor& x) { return tj::sin(x); }, {0, kPi / 6, kPi / 2, 1, -kPi / 2},
              {0, 0.5, 1, 0.8414709848078965, -1});
}

TEST_P(InterpOps, Cos) {
  check_unary([](const Tensor& x) { return tj::cos(x); }, {0, kPi / 3, kPi, 1}, {1, 0.5, -1, 0.5403023058681398});
}

TEST_P(InterpOps, Abs) {
  check_unary([](const Tensor& x) { return tj::abs(x); }, {-3, 0, 2.5, -0.5}, {3, 0, 2.5, 0.5});
  tj::Tracer t;
  Tensor x = t.input("x", DType::i64, {3});
  auto out = run(t.finish({tj::abs(x), tj::neg(x)}), {{"x", i64s({3}, {-7, 7, 0})}});
  expect_exact(out[0], DType::i64, {3}, {7, 7, 0});
  expect_exact(out[1], DType::i64, {3}, {7, -7, 0});
}

TEST_P(InterpOps, Sigmoid) {
  check_unary([](const Tensor& x) { return tj::sigmoid(x); }, {0, 2, -2, -30, 40},
              {0.5, 0.8807970779778824, 0.11920292202211756, 9.357622968839299e-14, 1});
}

TEST_P(InterpOps, Recip) {
  check_unary([](const Tensor& x) { return tj::recip(x); }, {2, -4, 0.5, 3, 0, -0.0},
              {0.5, -0.25, 2, 0.3333333333333333, kInf, -kInf});
}

TEST_P(InterpOps, CastFloatToInt) {
  tj::Tracer t;
  Tensor x = t.input("x", dt(), {7});
  auto out = run(t.finish({tj::cast(x, DType::i64), tj::cast(x, DType::i32)}),
                 {{"x", arr({7}, {1.9, -1.9, 2.5, -0.5, 0, 7, -7.99})}});
  // Truncation toward zero, like C.
  expect_exact(out[0], DType::i64, {7}, {1, -1, 2, 0, 0, 7, -7});
  expect_exact(out[1], DType::i32, {7}, {1, -1, 2, 0, 0, 7, -7});
}

TEST_P(InterpOps, CastToBool) {
  tj::Tracer t;
  Tensor x = t.input("x", dt(), {6});
  Tensor n = t.input("n", DType::i64, {3});
  auto out = run(t.finish({tj::cast(x, DType::boolean), tj::cast(n, DType::boolean)}),
                 {{"x", arr({6}, {0, -0.0, 0.5, -3, kNaN, kInf})}, {"n", i64s({3}, {0, 5, -1})}});
  expect_exact(out[0], DType::boolean, {6}, {0, 0, 1, 1, 1, 1});
  expect_exact(out[1], DType::boolean, {3}, {0, 1, 1});
}

TEST_P(InterpOps, CastToHalfPrecisionRounds) {
  tj::Tracer t;
  Tensor x = t.input("x", dt(), {6});
  Tensor h = t.input("h", dt(), {4});
  auto out = run(t.finish({tj::cast(x, DType::bf16), tj::cast(h, DType::f16)}),
                 {{"x", arr({6}, {1.00390625, 1.01171875, 1.0 + 0x1p-8 + 0x1p-20, 3, -1.0078125, 0.1})},
                  {"h", arr({4}, {1.0 + 0x1p-11, 1.0 + 3 * 0x1p-11, 65504, 70000})}});
  // bf16 keeps 8 significant bits: ties go to even (1+2^-8 -> 1, 1+3*2^-8 ->
  // 1+2^-6), just above a tie rounds up; 0.1 is 0x3DCD in bf16. The values
  // come back in the compute dtype.
  expect_dtype(out[0], dt());
  expect_array(out[0], {6}, {1.0, 1.015625, 1.0078125, 3, -1.0078125, 0.10009765625}, 0.0);
  // f16 keeps 11 significant bits; 70000 is beyond its largest value 65504.
  expect_dtype(out[1], dt());
  expect_array(out[1], {4}, {1.0, 1.001953125, 65504, kInf}, 0.0);
}

TEST_P(InterpOps, CastIntAndBoolToFloat) {
  tj::Tracer t;
  Tensor n = t.input("n", DType::i64, {3});
  Tensor x = t.input("x", dt(), {3});
  Tensor zero = t.scalar(0, dt());
  auto out = run(t.finish({tj::cast(n, dt()), tj::cast(tj::gt(x, zero), dt()), tj::cast(n, DType::i32)}),
                 {{"n", i64s({3}, {3, -2, 0})}, {"x", arr({3}, {-1, 0, 2})}});
  expect_float(out[0], {3}, {3, -2, 0});
  expect_float(out[1], {3}, {0, 0, 1});
  expect_exact(out[2], DType::i32, {3}, {3, -2, 0});
}

// bf16 values are rounded on input and after every op, not only at the end.
TEST_P(InterpOps, Bf16RoundsAfterEveryOp) {
  tj::Tracer t;
  Tensor x = t.input("x", DType::bf16, {1});
  Tensor c = t.scalar(0x1p-8, DType::bf16);
  Tensor twice = (x + c) + c;  // 1 + 2^-8 rounds back to 1, twice
  Tensor once = x + (c + c);   // 1 + 2^-7 is a bf16 value
  Tensor y = t.input("y", DType::bf16, {1});
  auto out = run(t.finish({twice, once, y * 1.0}),
                 {{"x", NDArray::from(DType::f32, {1}, {1.0})}, {"y", NDArray::from(DType::f32, {1}, {1.01171875})}});
  expect_dtype(out[0], dt());
  expect_array(out[0], {1}, {1.0}, 0.0);
  expect_array(out[1], {1}, {1.0078125}, 0.0);
  expect_array(out[2], {1}, {1.015625}, 0.0);
}

// ---- binary elementwise ------------------------------------------------------

TEST_P(InterpOps, ArithmeticSameShape) {
  tj::Tracer t;
  Tensor a = t.input("a", dt(), {4});
  Tensor b = t.input("b", dt(), {4});
  auto out = run(t.finish({a + b, a - b, a * b, a / b}),
                 {{"a", arr({4}, {1, -2, 3.5, 0})}, {"b", arr({4}, {4, 0.5, -2, 8})}});
  expect_float(out[0], {4}, {5, -1.5, 1.5, 8});
  expect_float(out[1], {4}, {-3, -2.5, 5.5, -8});
  expect_float(out[2], {4}, {4, -1, -7, 0});
  expect_float(out[3], {4}, {0.25, -4, -1.75, 0});
}

TEST_P(InterpOps, ArithmeticWithScalar) {
  tj::Tracer t;
  Tensor x = t.input("x", dt(), {2, 2});
  auto out = run(t.finish({x + 10.0, 10.0 - x, x * 0.5, 1.0 / x, x / 4.0}), {{"x", arr({2, 2}, {1, 2, 4, -8})}});
  expect_float(out[0], {2, 2}, {11, 12, 14, 2});
  expect_float(out[1], {2, 2}, {9, 8, 6, 18});
  expect_float(out[2], {2, 2}, {0.5, 1, 2, -4});
  expect_float(out[3], {2, 2}, {1, 0.5, 0.25, -0.125});
  expect_float(out[4], {2, 2}, {0.25, 0.5, 1, -2});
}

TEST_P(InterpOps, BroadcastRowVector) {
  tj::Tracer t;
  Tensor m = t.input("m", dt(), {2, 3});
  Tensor r = t.input("r", dt(), {3});
  auto out = run(t.finish({m + r, m * r, r - m}), {{"m", arr({2, 3}, {1, 2, 3, 4, 5, 6})}, {"r", arr({3}, {10, 20, 30})}});
  expect_float(out[0], {2, 3}, {11, 22, 33, 14, 25, 36});
  expect_float(out[1], {2, 3}, {10, 40, 90, 40, 100, 180});
  expect_float(out[2], {2, 3}, {9, 18, 27, 6, 15, 24});
}

TEST_P(InterpOps, BroadcastColumnAgainstRow) {
  tj::Tracer t;
  Tensor a = t.input("a", dt(), {3, 1});
  Tensor b = t.input("b", dt(), {1, 4});
  Tensor c = t.input("c", dt(), {3, 1});
  auto out = run(t.finish({a + b, a - b, a * b, b / a, tj::maximum(c, b), tj::minimum(c, b)}),
                 {{"a", arr({3, 1}, {1, 2, 3})}, {"b", arr({1, 4}, {10, 20, 30, 40})}, {"c", arr({3, 1}, {15, 25, 35})}});
  expect_float(out[0], {3, 4}, {11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43});
  expect_float(out[1], {3, 4}, {-9, -19, -29, -39, -8, -18, -28, -38, -7, -17, -27, -37});
  expect_float(out[2], {3, 4}, {10, 20, 30, 40, 20, 40, 60, 80, 30, 60, 90, 120});
  expect_float(out[3], {3, 4}, {10, 20, 30, 40, 5, 10, 15, 20, 10.0 / 3, 20.0 / 3, 10, 40.0 / 3});
  expect_float(out[4], {3, 4}, {15, 20, 30, 40, 25, 25, 30, 40, 35, 35, 35, 40});
  expect_float(out[5], {3, 4}, {10, 15, 15, 15, 10, 20, 25, 25, 10, 20, 30, 35});
}

TEST_P(InterpOps, BroadcastDifferentRanks) {
  tj::Tracer t;
  Tensor p = t.input("p", dt(), {2, 1, 3});
  Tensor q = t.input("q", dt(), {2, 1});
  Tensor c = t.input("c", dt(), {3, 1});
  Tensor r = t.input("r", dt(), {4});
  auto out = run(t.finish({p + q, c * r}), {{"p", arr({2, 1, 3}, {0, 1, 2, 3, 4, 5})},
                                            {"q", arr({2, 1}, {10, 20})},
                                            {"c", arr({3, 1}, {1, 2, 3})},
                                            {"r", arr({4}, {1, 10, 100, 1000})}});
  expect_float(out[0], {2, 2, 3}, {10, 11, 12, 20, 21, 22, 13, 14, 15, 23, 24, 25});
  expect_float(out[1], {3, 4}, {1, 10, 100, 1000, 2, 20, 200, 2000, 3, 30, 300, 3000});
}

TEST_P(InterpOps, FloatDivisionByZeroIsIeee) {
  check_unary([](const Tensor& x) { return x / 0.0; }, {1, -1, 0}, {kInf, -kInf, kNaN});
}

TEST_P(InterpOps, MaxMinPropagateNaN) {
  tj::Tracer t;
  Tensor a = t.input("a", dt(), {5});
  Tensor b = t.input("b", dt(), {5});
  Tensor zero = t.scalar(0, dt());
  auto out = run(t.finish({tj::maximum(a, b), tj::minimum(a, b), tj::maximum(a, zero), tj::minimum(b, zero)}),
                 {{"a", arr({5}, {1, 5, -2, kNaN, 0})}, {"b", arr({5}, {3, 5, -7, 0, kNaN})}});
  expect_float(out[0], {5}, {3, 5, -2, kNaN, kNaN});
  expect_float(out[1], {5}, {1, 5, -7, kNaN, kNaN});
  expect_float(out[2], {5}, {1, 5, 0, kNaN, 0});
  expect_float(out[3], {5}, {0, 0, -7, 0, kNaN});
}

// max/min are commutative down to the sign of zero: max(-0, +0) = +0 and
// min(-0, +0) = -0 in either order (IEEE 754-2019 maximum/minimum).
TEST_P(InterpOps, MaxMinSignedZero) {
  tj::Tracer t;
  Tensor a = t.input("a", dt(), {2});
  Tensor b = t.input("b", dt(), {2});
  auto out = run(t.finish({tj::maximum(a, b), tj::minimum(a, b)}), {{"a", arr({2}, {-0.0, 0.0})}, {"b", arr({2}, {0.0, -0.0})}});
  for (int64_t i = 0; i < 2; ++i) {
    EXPECT_EQ(out[0].get(i), 0.0);
    EXPECT_FALSE(std::signbit(out[0].get(i))) << "max, element " << i;
    EXPECT_EQ(out[1].get(i), 0.0);
    EXPECT_TRUE(std::signbit(out[1].get(i))) << "min, element " << i;
  }
}

TEST_P(InterpOps, Pow) {
  tj::Tracer t;
  Tensor a = t.input("a", dt(), {6});
  Tensor b = t.input("b", dt(), {6});
  Tensor x = t.input("x", dt(), {2});
  auto out = run(t.finish({tj::pow(a, b), tj::pow(x, 2.0)}),
                 {{"a", arr({6}, {2, 9, 4, 2, 0, -2})}, {"b", arr({6}, {3, 0.5, -1, 0.5, 0, 2})}, {"x", arr({2}, {-3, 1.5})}});
  expect_float(out[0], {6}, {8, 3, 0.25, kSqrt2, 1, 4});
  expect_float(out[1], {2}, {9, 2.25});
}

TEST_P(InterpOps, IntegerArithmetic) {
  tj::Tracer t;
  Tensor a = t.input("a", DType::i64, {7});
  Tensor b = t.input("b", DType::i64, {7});
  Tensor c = t.input("c", DType::i32, {2});
  Tensor d = t.input("d", DType::i32, {2});
  auto out = run(t.finish({a / b, a + b, a - b, a * b, tj::maximum(a, b), tj::minimum(a, b), c / d}),
                 {{"a", i64s({7}, {7, -7, 7, -7, 6, 0, 1})},
                  {"b", i64s({7}, {2, 2, -2, -2, 3, 5, 7})},
                  {"c", NDArray::from(DType::i32, {2}, {-9, 9})},
                  {"d", NDArray::from(DType::i32, {2}, {4, 4})}});
  // Division truncates toward zero, like C.
  expect_exact(out[0], DType::i64, {7}, {3, -3, -3, 3, 2, 0, 0});
  expect_exact(out[1], DType::i64, {7}, {9, -5, 5, -9, 9, 5, 8});
  expect_exact(out[2], DType::i64, {7}, {5, -9, 9, -5, 3, -5, -6});
  expect_exact(out[3], DType::i64, {7}, {14, -14, -14, 14, 18, 0, 7});
  expect_exact(out[4], DType::i64, {7}, {7, 2, 7, -2, 6, 5, 7});
  expect_exact(out[5], DType::i64, {7}, {2, -7, -2, -7, 3, 0, 1});
  expect_exact(out[6], DType::i32, {2}, {-2, 2});
}

TEST_P(InterpOps, IntegerDivisionByZeroThrows) {
  tj::Tracer t;
  Tensor a = t.input("a", DType::i64, {2});
  Tensor b = t.input("b", DType::i64, {2});
  tj::Graph g = t.finish({a / b});
  expect_error([&] { run(g, {{"a", i64s({2}, {1, 2})}, {"b", i64s({2}, {1, 0})}}); }, {"division by zero", "div"});
}

// ---- comparisons and selection -----------------------------------------------

TEST_P(InterpOps, Comparisons) {
  tj::Tracer t;
  Tensor a = t.input("a", dt(), {5});
  Tensor b = t.input("b", dt(), {5});
  auto out = run(t.finish({tj::eq(a, b), tj::ne(a, b), tj::lt(a, b), tj::le(a, b), tj::gt(a, b), tj::ge(a, b)}),
                 {{"a", arr({5}, {1, 2, 3, kNaN, -0.0})}, {"b", arr({5}, {2, 2, 2, kNaN, 0})}});
  expect_exact(out[0], DType::boolean, {5}, {0, 1, 0, 0, 1});
  expect_exact(out[1], DType::boolean, {5}, {1, 0, 1, 1, 0});
  expect_exact(out[2], DType::boolean, {5}, {1, 0, 0, 0, 0});
  expect_exact(out[3], DType::boolean, {5}, {1, 1, 0, 0, 1});
  expect_exact(out[4], DType::boolean, {5}, {0, 0, 1, 0, 0});
  expect_exact(out[5], DType::boolean, {5}, {0, 1, 1, 0, 1});
}

TEST_P(InterpOps, ComparisonsBroadcastAndIntegers) {
  tj::Tracer t;
  Tensor c = t.input("c", dt(), {2, 1});
  Tensor r = t.input("r", dt(), {3});
  Tensor m = t.input("m", DType::i64, {2});
  Tensor n = t.input("n", DType::i64, {2});
  auto out = run(t.finish({tj::lt(c, r), tj::ge(m, n), tj::eq(m, n)}),
                 {{"c", arr({2, 1}, {1, 3})}, {"r", arr({3}, {0, 2, 4})}, {"m", i64s({2}, {1, 5})}, {"n", i64s({2}, {5, 5})}});
  expect_exact(out[0], DType::boolean, {2, 3}, {0, 1, 1, 0, 0, 1});
  expect_exact(out[1], DType::boolean, {2}, {0, 1});
  expect_exact(out[2], DType::boolean, {2}, {0, 1});
}

TEST_P(InterpOps, Where) {
  tj::Tracer t;
  Tensor cond = t.input("cond", DType::boolean, {2, 1});
  Tensor a = t.input("a", dt(), {3});
  Tensor b = t.scalar(-1, dt());
  Tensor x = t.input("x", dt(), {4});
  Tensor relu = tj::where(tj::gt(x, t.scalar(0, dt())), x, t.scalar(0, dt()));
  Tensor n = t.input("n", DType::i64, {3});
  Tensor clamp = tj::where(tj::lt(n, t.scalar(0, DType::i64)), t.scalar(0, DType::i64), n);
  auto out = run(t.finish({tj::where(cond, a, b), relu, clamp}), {{"cond", NDArray::from(DType::boolean, {2, 1}, {1, 0})},
                                                                    {"a", arr({3}, {1, 2, 3})},
                                                                    {"x", arr({4}, {-1, 0.5, 2, 0})},
                                                                    {"n", i64s({3}, {-4, 4, 0})}});
  expect_float(out[0], {2, 3}, {1, 2, 3, -1, -1, -1});
  expect_float(out[1], {4}, {0, 0.5, 2, 0});
  expect_exact(out[2], DType::i64, {3}, {0, 4, 0});
}

// ---- reductions ----------------------------------------------------------------

// x[i,j,l] = 12i + 4j + l over [2,3,4]: row sums and means follow by hand.
TEST_P(InterpOps, Reductions) {
  Vals data(24);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<double>(i);
  tj::Tracer t;
  Tensor x = t.input("x", dt(), {2, 3, 4});
  auto out = run(t.finish({
                     tj::sum(x, {2}),                    // 0
                     tj::sum(x, {0, 2}, true),           // 1
                     tj::sum(x, {-1, -3}),               // 2
                     tj::sum(x, {1}, true),              // 3
                     tj::sum(x, {0, 1, 2}),              // 4
                     tj::amax(x, {1}),                   // 5
                     tj::amax(x, {-1}, true),            // 6
                     tj::mean(x, {2}),                   // 7
                     tj::mean(x, {0, 1}, true),          // 8
                     tj::mean(x, {0, 1, 2}),             // 9
                     tj::sum(x, {}),                     // 10
                     tj::amax(x, {2, 0}, true),          // 11
                 }),
                 {{"x", arr({2, 3, 4}, data)}});
  expect_float(out[0], {2, 3}, {6, 22, 38, 54, 70, 86});
  expect_float(out[1], {1, 3, 1}, {60, 92, 124});
  expect_float(out[2], {3}, {60, 92, 124});
  expect_float(out[3], {2, 1, 4}, {12, 15, 18, 21, 48, 51, 54, 57});
  expect_float(out[4], {}, {276});
  expect_float(out[5], {2, 4}, {8, 9, 10, 11, 20, 21, 22, 23});
  expect_float(out[6], {2, 3, 1}, {3, 7, 11, 15, 19, 23});
  expect_float(out[7], {2, 3}, {1.5, 5.5, 9.5, 13.5, 17.5, 21.5});
  expect_float(out[8], {1, 1, 4}, {10, 11, 12, 13});
  expect_float(out[9], {}, {11.5});
  expect_float(out[10], {2, 3, 4}, data);
  expect_float(out[11], {1, 3, 1}, {15, 19, 23});
}

TEST_P(InterpOps, ReductionsNaNAndNegatives) {
  tj::Tracer t;
  Tensor y = t.input("y", dt(), {3});
  Tensor z = t.input("z", dt(), {3, 3});
  Tensor w = t.input("w", dt(), {2});
  auto out = run(t.finish({tj::amax(y, {0}), tj::amax(z, {1}), tj::amax(z, {0}), tj::sum(z, {1}), tj::amax(w, {0})}),
                 {{"y", arr({3}, {-5, -3, -9})},
                  {"z", arr({3, 3}, {1, kNaN, 3, 4, 5, -kInf, kNaN, 0, 2})},
                  {"w", arr({2}, {-kInf, -kInf})}});
  expect_float(out[0], {}, {-3});
  expect_float(out[1], {3}, {kNaN, 5, kNaN});
  expect_float(out[2], {3}, {kNaN, kNaN, 3});
  expect_float(out[3], {3}, {kNaN, -kInf, kNaN});
  expect_float(out[4], {}, {-kInf});
}

TEST_P(InterpOps, IntegerReductions) {
  tj::Tracer t;
  Tensor n = t.input("n", DType::i64, {2, 2});
  auto out = run(t.finish({tj::sum(n, {0, 1}), tj::amax(n, {1}), tj::sum(n, {0}, true)}),
                 {{"n", i64s({2, 2}, {1, 2, 3, -10})}});
  expect_exact(out[0], DType::i64, {}, {-4});
  expect_exact(out[1], DType::i64, {2}, {2, 3});
  expect_exact(out[2], DType::i64, {1, 2}, {4, -8});
}

// ---- matmul ----------------------------------------------------------------------

TEST_P(InterpOps, Matmul2D) {
  tj::Tracer t;
  Tensor a = t.input("a", dt(), {2, 3});
  Tensor b = t.input("b", dt(), {3, 2});
  auto out = run(t.finish({tj::matmul(a, b), tj::matmul(b, a)}),
                 {{"a", arr({2, 3}, {1, 2, 3, 4, 5, 6})}, {"b", arr({3, 2}, {7, 8, 9, 10, 11, 12})}});
  expect_float(out[0], {2, 2}, {58, 64, 139, 154});
  expect_float(out[1], {3, 3}, {39, 54, 69, 49, 68, 87, 59, 82, 105});
}

TEST_P(InterpOps, MatmulBatched) {
  tj::Tracer t;
  Tensor a = t.input("a", dt(), {2, 2, 2});
  Tensor b = t.input("b", dt(), {2, 2, 2});
  auto out = run(t.finish({tj::matmul(a, b)}),
                 {{"a", arr({2, 2, 2}, {1, 2, 3, 4, 2, 0, 0, 2})}, {"b", arr({2, 2, 2}, {5, 6, 7, 8, 1, 2, 3, 4})}});
  expect_float(out[0], {2, 2, 2}, {19, 22, 43, 50, 2, 4, 6, 8});
}

// [2,1,2,3] @ [3,3,2] -> [2,3,2,2]: a's batch 1 and b's missing leading dim
// both broadcast. a[0] picks rows 0 and 1 of b[k]; a[1] gives b[k]'s column
// sums and twice its last row.
TEST_P(InterpOps, MatmulBroadcastBatch) {
  tj::Tracer t;
  Tensor a = t.input("a", dt(), {2, 1, 2, 3});
  Tensor b = t.input("b", dt(), {3, 3, 2});
  auto out = run(t.finish({tj::matmul(a, b)}),
                 {{"a", arr({2, 1, 2, 3}, {1, 0, 0, 0, 1, 0, 1, 1, 1, 0, 0, 2})},
                  {"b", arr({3, 3, 2}, {1, 2, 3, 4, 5, 6, 0, 1, 1, 0, 2, 2, -1, 0, 0, -1, 1, 1})}});
  expect_float(out[0], {2, 3, 2, 2},
               {1, 2, 3, 4, 0, 1, 1, 0, -1, 0, 0, -1, 9, 12, 10, 12, 3, 3, 4, 4, 0, 0, 2, 2});
}

TEST_P(InterpOps, MatmulMatrixTimesBatch) {
  tj::Tracer t;
  Tensor a = t.input("a", dt(), {2, 3});
  Tensor b = t.input("b", dt(), {2, 3, 1});
  auto out = run(t.finish({tj::matmul(a, b)}),
                 {{"a", arr({2, 3}, {1, 2, 3, 4, 5, 6})}, {"b", arr({2, 3, 1}, {1, 1, 1, 1, 0, -1})}});
  expect_float(out[0], {2, 2, 1}, {6, 15, -2, -2});
}

// K = 300 spans more than one 256-wide block of the kernel's k loop.
TEST_P(InterpOps, MatmulLongContraction) {
  Vals a(600), b(600);
  for (size_t k = 0; k < 300; ++k) {
    a[k] = 1;
    a[300 + k] = static_cast<double>(k);
    b[2 * k] = 1;
    b[2 * k + 1] = static_cast<double>(k);
  }
  tj::Tracer t;
  Tensor x = t.input("a", dt(), {2, 300});
  Tensor y = t.input("b", dt(), {300, 2});
  auto out = run(t.finish({tj::matmul(x, y)}), {{"a", arr({2, 300}, a)}, {"b", arr({300, 2}, b)}});
  // sum k = 299*300/2, sum k^2 = 299*300*599/6.
  expect_float(out[0], {2, 2}, {300, 44850, 44850, 8955050});
}

TEST_P(InterpOps, MatmulIntegers) {
  tj::Tracer t;
  Tensor a = t.input("a", DType::i64, {1, 2});
  Tensor b = t.input("b", DType::i64, {2, 1});
  auto out = run(t.finish({tj::matmul(a, b)}), {{"a", i64s({1, 2}, {1, -2})}, {"b", i64s({2, 1}, {3, 4})}});
  expect_exact(out[0], DType::i64, {1, 1}, {-5});
}

// ---- views -------------------------------------------------------------------

TEST_P(InterpOps, Reshape) {
  tj::Tracer t;
  Tensor x = t.input("x", dt(), {2, 3});
  Tensor r = tj::reshape(x, {3, 2});
  auto out = run(t.finish({r, tj::reshape(x, {-1}), tj::sum(r, {1}), tj::reshape(x, {1, 6, 1})}),
                 {{"x", arr({2, 3}, {0, 1, 2, 3, 4, 5})}});
  expect_float(out[0], {3, 2}, {0, 1, 2, 3, 4, 5});
  expect_float(out[1], {6}, {0, 1, 2, 3, 4, 5});
  expect_float(out[2], {3}, {1, 5, 9});
  expect_float(out[3], {1, 6, 1}, {0, 1, 2, 3, 4, 5});
}

TEST_P(InterpOps, Permute) {
  Vals data(24);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<double>(i);
  tj::Tracer t;
  Tensor x = t.input("x", dt(), {2, 3, 4});
  Tensor m = t.input("m", dt(), {2, 3});
  auto out = run(t.finish({tj::permute(x, {2, 0, 1}), tj::permute(x, {-1, 0, 1}), tj::transpose(m), tj::permute(x, {1, 0, 2})}),
                 {{"x", arr({2, 3, 4}, data)}, {"m", arr({2, 3}, {0, 1, 2, 3, 4, 5})}});
  // out[l,i,j] = x[i,j,l] = 12i + 4j + l
  Vals want = {0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23};
  expect_float(out[0], {4, 2, 3}, want);
  expect_float(out[1], {4, 2, 3}, want);
  expect_float(out[2], {3, 2}, {0, 3, 1, 4, 2, 5});
  // out[j,i,l] = 12i + 4j + l
  expect_float(out[3], {3, 2, 4}, {0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 16, 17, 18, 19, 8, 9, 10, 11, 20, 21, 22, 23});
}

// Transposes of the last two dims go in tiles: sizes that are not a
// multiple of the tile, batch dims in order and permuted.
TEST_P(InterpOps, TransposesInTiles) {
  struct Case {
    std::vector<int64_t> shape, perm;
  };
  for (const Case& c : {Case{{37, 70}, {1, 0}}, Case{{3, 37, 70}, {0, 2, 1}}, Case{{2, 3, 33, 40}, {0, 1, 3, 2}}, Case{{33, 2, 40}, {1, 2, 0}}}) {
    int64_t n = 1;
    for (int64_t d : c.shape) n *= d;
    Vals data(static_cast<size_t>(n));
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<double>(i);
    tj::Tracer t;
    Tensor x = t.input("x", dt(), std::vector<Dim>(c.shape.begin(), c.shape.end()));
    auto out = run(t.finish({tj::permute(x, c.perm)}), {{"x", arr(c.shape, data)}});
    std::vector<int64_t> os, in_st(c.shape.size(), 1);
    for (size_t d = c.shape.size() - 1; d-- > 0;) in_st[d] = in_st[d + 1] * c.shape[d + 1];
    for (int64_t p : c.perm) os.push_back(c.shape[static_cast<size_t>(p)]);
    Vals want;
    std::vector<int64_t> idx(os.size(), 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t at = 0;
      for (size_t d = 0; d < os.size(); ++d) at += idx[d] * in_st[static_cast<size_t>(c.perm[d])];
      want.push_back(static_cast<double>(at));
      for (size_t d = os.size(); d-- > 0;)
        if (++idx[d] < os[d]) break;
        else idx[d] = 0;
    }
    expect_float(out[0], os, want);
  }
}

TEST_P(InterpOps, Expand) {
  tj::Tracer t;
  Tensor c = t.input("c", dt(), {3, 1});
  Tensor r = t.input("r", dt(), {1, 3});
  Tensor s = t.input("s", dt(), {});
  auto out = run(t.finish({tj::expand(c, {2, 3, 4}), tj::expand(r, {2, 3}), tj::expand(s, {3})}),
                 {{"c", arr({3, 1}, {1, 2, 3})}, {"r", arr({1, 3}, {7, 8, 9})}, {"s", arr({}, {5})}});
  expect_float(out[0], {2, 3, 4}, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  expect_float(out[1], {2, 3}, {7, 8, 9, 7, 8, 9});
  expect_float(out[2], {3}, {5, 5, 5});
}

// x[i,j] = 5i + j over [2,5].
TEST_P(InterpOps, Slice) {
  tj::Tracer t;
  Tensor x = t.input("x", dt(), {2, 5});
  auto out = run(t.finish({
                     tj::slice(x, 1, 1, 5, 2),    // columns 1, 3
                     tj::slice(x, 1, 0, 5, 2),    // columns 0, 2, 4
                     tj::slice(x, 1, -2, 5),      // columns 3, 4
                     tj::slice(x, -1, -3, -1),    // columns 2, 3
                     tj::slice(x, 0, 1, 2),       // row 1
                     tj::slice(x, 1, 3, 100),     // end clamps to 5
                     tj::slice(x, 1, 2, 2),       // empty
                 }),
                 {{"x", arr({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})}});
  expect_float(out[0], {2, 2}, {1, 3, 6, 8});
  expect_float(out[1], {2, 3}, {0, 2, 4, 5, 7, 9});
  expect_float(out[2], {2, 2}, {3, 4, 8, 9});
  expect_float(out[3], {2, 2}, {2, 3, 7, 8});
  expect_float(out[4], {1, 5}, {5, 6, 7, 8, 9});
  expect_float(out[5], {2, 2}, {3, 4, 8, 9});
  expect_float(out[6], {2, 0}, {});
}

TEST_P(InterpOps, SqueezeUnsqueeze) {
  tj::Tracer t;
  Tensor x = t.input("x", dt(), {1, 3, 1});
  Tensor v = t.input("v", dt(), {3});
  auto out = run(t.finish({tj::squeeze(x, {0, 2}), tj::squeeze(x, {-1}), tj::unsqueeze(v, {0}), tj::unsqueeze(v, {-1}),
                           tj::unsqueeze(v, {0, 2}), tj::unsqueeze(v, {-1}) + v}),
                 {{"x", arr({1, 3, 1}, {4, 5, 6})}, {"v", arr({3}, {1, 2, 3})}});
  expect_float(out[0], {3}, {4, 5, 6});
  expect_float(out[1], {1, 3}, {4, 5, 6});
  expect_float(out[2], {1, 3}, {1, 2, 3});
  expect_float(out[3], {3, 1}, {1, 2, 3});
  expect_float(out[4], {1, 3, 1}, {1, 2, 3});
  expect_float(out[5], {3, 3}, {2, 3, 4, 3, 4, 5, 4, 5, 6});
}

// ---- data movement -----------------------------------------------------------

TEST_P(InterpOps, Concat) {
  tj::Tracer t;
  Tensor a = t.input("a", dt(), {2, 1, 2});
  Tensor b = t.input("b", dt(), {2, 2, 2});
  Tensor c = t.input("c", dt(), {2, 1, 2});
  auto out = run(t.finish({tj::concat({a, b, c}, 1), tj::concat({a, c}, 0), tj::concat({a, c}, -1)}),
                 {{"a", arr({2, 1, 2}, {1, 2, 3, 4})},
                  {"b", arr({2, 2, 2}, {10, 11, 12, 13, 14, 15, 16, 17})},
                  {"c", arr({2, 1, 2}, {100, 101, 102, 103})}});
  expect_float(out[0], {2, 4, 2}, {1, 2, 10, 11, 12, 13, 100, 101, 3, 4, 14, 15, 16, 17, 102, 103});
  expect_float(out[1], {4, 1, 2}, {1, 2, 3, 4, 100, 101, 102, 103});
  expect_float(out[2], {2, 1, 4}, {1, 2, 100, 101, 3, 4, 102, 103});
}

TEST_P(InterpOps, ConcatIntegers) {
  tj::Tracer t;
  Tensor a = t.input("a", DType::i64, {1});
  Tensor b = t.input("b", DType::i64, {2});
  auto out = run(t.finish({tj::concat({a, b, a}, 0)}), {{"a", i64s({1}, {-1})}, {"b", i64s({2}, {5, 6})}});
  expect_exact(out[0], DType::i64, {4}, {-1, 5, 6, -1});
}

// table[r] = {10r, 10r+1, 10r+2} over [4,3].
TEST_P(InterpOps, GatherAxis0Embedding) {
  tj::Tracer t;
  Tensor table = t.input("table", dt(), {4, 3});
  Tensor ids = t.input("ids", DType::i64, {2, 2});
  Tensor one = t.input("one", DType::i64, {});
  auto out = run(t.finish({tj::gather(table, ids), tj::gather(table, one)}),
                 {{"table", arr({4, 3}, {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32})},
                  {"ids", i64s({2, 2}, {3, 0, 1, -1})},
                  {"one", NDArray::scalar(DType::i64, 2)}});
  expect_float(out[0], {2, 2, 3}, {30, 31, 32, 0, 1, 2, 10, 11, 12, 30, 31, 32});
  expect_float(out[1], {3}, {20, 21, 22});
}

TEST_P(InterpOps, GatherAxis1) {
  tj::Tracer t;
  Tensor table = t.input("table", dt(), {2, 4});
  Tensor ids = t.input("ids", DType::i32, {3});
  Tensor itable = t.input("itable", DType::i64, {2, 2});
  auto out = run(t.finish({tj::gather(table, ids, 1), tj::gather(table, ids, -1), tj::gather(itable, ids, 0)}),
                 {{"table", arr({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7})},
                  {"ids", NDArray::from(DType::i32, {3}, {1, 0, -2})},
                  {"itable", i64s({2, 2}, {7, 8, 9, 10})}});
  expect_float(out[0], {2, 3}, {1, 0, 2, 5, 4, 6});
  expect_float(out[1], {2, 3}, {1, 0, 2, 5, 4, 6});
  expect_exact(out[2], DType::i64, {3, 2}, {9, 10, 7, 8, 7, 8});
}

TEST_P(InterpOps, GatherOutOfRangeThrows) {
  tj::Tracer t;
  Tensor table = t.input("table", dt(), {4, 3});
  Tensor ids = t.input("ids", DType::i64, {2});
  tj::Graph g = t.finish({tj::gather(table, ids)});
  NDArray tab = arr({4, 3}, Vals(12, 1.0));
  expect_error([&] { run(g, {{"table", tab}, {"ids", i64s({2}, {0, 4})}}); }, {"gather", "4", "out of range"});
  expect_error([&] { run(g, {{"table", tab}, {"ids", i64s({2}, {-5, 0})}}); }, {"gather", "-5", "out of range"});
  // The edges of the valid range are fine.
  auto out = run(g, {{"table", tab}, {"ids", i64s({2}, {3, -4})}});
  expect_float(out[0], {2, 3}, Vals(6, 1.0));
}

// ---- composites ----------------------------------------------------------------

TEST_P(InterpOps, SoftmaxLastAxis) {
  tj::Tracer t;
  Tensor x = t.input("x", dt(), {4, 3});
  auto out = run(t.finish({tj::softmax(x), tj::softmax(x, 1)}),
                 {{"x", arr({4, 3}, {0, kLn2, kLn5, 1000, 1001, 1002, -1000, -1000, -1000, 0, -kInf, kLn3})}});
  // exp(0, ln2, ln5) = 1, 2, 5 of 8; 1000..1002 would overflow exp without
  // subtracting the max: weights 1, e, e^2 of 1 + e + e^2.
  Vals want = {0.125, 0.25, 0.625, 0.09003057317038046, 0.24472847105479764, 0.6652409557748219,
               1.0 / 3, 1.0 / 3, 1.0 / 3, 0.25, 0, 0.75};
  expect_float(out[0], {4, 3}, want);
  expect_float(out[1], {4, 3}, want);
}

TEST_P(InterpOps, SoftmaxAxis0) {
  tj::Tracer t;
  Tensor x = t.input("x", dt(), {2, 2});
  auto out = run(t.finish({tj::softmax(x, 0), tj::softmax(x, -2)}), {{"x", arr({2, 2}, {0, 1000, kLn3, 1000})}});
  expect_float(out[0], {2, 2}, {0.25, 0.5, 0.75, 0.5});
  expect_float(out[1], {2, 2}, {0.25, 0.5, 0.75, 0.5});
}

// Rows chosen so the mean square is a perfect square: 1, 4, 25/4.
TEST_P(InterpOps, RmsNorm) {
  tj::Tracer t;
  Tensor x = t.input("x", dt(), {3, 4});
  Tensor w = t.param("w", dt(), {4});
  Tensor y = t.input("y", dt(), {1, 2});
  Tensor v = t.param("v", dt(), {2});
  auto out = run(t.finish({tj::rms_norm(x, w, 0.0), tj::rms_norm(y, v, 3.0)}),
                 {{"x", arr({3, 4}, {1, -1, 1, -1, 2, 2, 2, 2, 3, 4, 0, 0})},
                  {"w", arr({4}, {1, 2, 0.5, -1})},
                  {"y", arr({1, 2}, {1, 1})},
                  {"v", arr({2}, {1, -4})}});
  expect_float(out[0], {3, 4}, {1, -2, 0.5, 1, 1, 2, 0.5, -1, 1.2, 3.2, 0, 0});
  // eps goes under the root: 1 / sqrt(1 + 3) = 0.5.
  expect_float(out[1], {1, 2}, {0.5, -2});
}

// Rows with mean 2 and variance 1 and 4.
TEST_P(InterpOps, LayerNorm) {
  tj::Tracer t;
  Tensor x = t.input("x", dt(), {2, 4});
  Tensor w = t.param("w", dt(), {4});
  Tensor b = t.param("b", dt(), {4});
  Tensor y = t.input("y", dt(), {2});
  Tensor v = t.param("v", dt(), {2});
  Tensor c = t.param("c", dt(), {2});
  auto out = run(t.finish({tj::layer_norm(x, w, b, 0.0), tj::layer_norm(y, v, c, 3.0)}),
                 {{"x", arr({2, 4}, {1, 3, 1, 3, 0, 0, 4, 4})},
                  {"w", arr({4}, {1, 2, 3, 4})},
                  {"b", arr({4}, {0, 0.5, 0, -1})},
                  {"y", arr({2}, {0, 2})},
                  {"v", arr({2}, {2, 2})},
                  {"c", arr({2}, {1, 1})}});
  expect_float(out[0], {2, 4}, {-1, 2.5, -3, 3, -1, -1.5, 3, 3});
  // mean 1, variance 1, 1 / sqrt(1 + 3) = 0.5: (-0.5, 0.5) * 2 + 1.
  expect_float(out[1], {2}, {0, 2});
}

TEST_P(InterpOps, Silu) {
  check_unary([](const Tensor& x) { return tj::silu(x); }, {0, 1, -1, 2, -3},
              {0, 0.7310585786300049, -0.2689414213699951, 1.7615941559557649, -0.14227761953270035});
}

// The tanh form, 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))); the erf form
// would give 0.8413447460685429 at 1.
TEST_P(InterpOps, Gelu) {
  check_unary([](const Tensor& x) { return tj::gelu(x); }, {0, 1, -1, 2, -0.5, 3},
              {0, 0.8411919906082767, -0.1588080093917233, 1.954597694087775, -0.15428599017485609, 2.996362607918227});
}

// ---- special -------------------------------------------------------------------

TEST_P(InterpOps, CausalMask) {
  tj::Tracer t;
  Tensor pos = t.input("pos", DType::i64, {});
  tj::Graph g = t.finish({tj::causal_mask(pos, 2, 4, dt())});
  auto out0 = run(g, {{"pos", NDArray::scalar(DType::i64, 0)}});
  expect_float(out0[0], {2, 4}, {0, -kInf, -kInf, -kInf, 0, 0, -kInf, -kInf});
  auto out2 = run(g, {{"pos", NDArray::scalar(DType::i64, 2)}});
  expect_float(out2[0], {2, 4}, {0, 0, 0, -kInf, 0, 0, 0, 0});
}

// A fixed f32 mask with a constant i32 offset comes back in the compute dtype.
TEST_P(InterpOps, CausalMaskConstOffset) {
  tj::Tracer t;
  Tensor pos = t.scalar(1, DType::i32);
  auto out = run(t.finish({tj::causal_mask(pos, 3, 3, DType::f32)}));
  expect_float(out[0], {3, 3}, {0, 0, -kInf, 0, 0, 0, 0, 0, 0});
}

TEST_P(InterpOps, KvWrite) {
  tj::Tracer t;
  Tensor cache = t.input("cache", dt(), {1, 1, 4, 2});
  Tensor rows = t.input("rows", dt(), {1, 1, 2, 2});
  Tensor pos = t.input("pos", DType::i64, {});
  tj::Graph g = t.finish({tj::kv_write(cache, rows, pos), cache});
  NDArray c = arr({1, 1, 4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  NDArray r = arr({1, 1, 2, 2}, {10, 20, 30, 40});
  auto at = [&](double p) { return run(g, {{"cache", c}, {"rows", r}, {"pos", NDArray::scalar(DType::i64, p)}}); };
  auto out1 = at(1);
  expect_float(out1[0], {1, 1, 4, 2}, {1, 2, 10, 20, 30, 40, 7, 8});
  expect_float(out1[1], {1, 1, 4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});  // functional: the cache is unchanged
  expect_float(at(0)[0], {1, 1, 4, 2}, {10, 20, 30, 40, 5, 6, 7, 8});
  expect_float(at(2)[0], {1, 1, 4, 2}, {1, 2, 3, 4, 10, 20, 30, 40});
  expect_error([&] { at(3); }, {"kv_write", "outside cache length 4"});
  expect_error([&] { at(-1); }, {"kv_write"});
}

// Two heads: the rows land at the same position in each.
TEST_P(InterpOps, KvWriteManyHeads) {
  tj::Tracer t;
  Tensor cache = t.input("cache", dt(), {1, 2, 3, 1});
  Tensor rows = t.input("rows", dt(), {1, 2, 1, 1});
  Tensor pos = t.scalar(2, DType::i32);
  auto out = run(t.finish({tj::kv_write(cache, rows, pos)}),
                 {{"cache", arr({1, 2, 3, 1}, {1, 2, 3, 4, 5, 6})}, {"rows", arr({1, 2, 1, 1}, {9, 8})}});
  expect_float(out[0], {1, 2, 3, 1}, {1, 2, 9, 4, 5, 8});
}

// Shared attention data. With scale 0.5, query {2,0} scores the keys by their
// first component {0, ln2, ln5} (weights 1:2:5) and {0,2} by their second
// {ln3, 0, 0} (weights 3:1:1). Values {8,0}, {0,8}, {16,-8} give
//   (1*{8,0} + 2*{0,8} + 5*{16,-8}) / 8 = {11, -3}
//   (3*{8,0} + 1*{0,8} + 1*{16,-8}) / 5 = {8, 0}
const Vals kAttnK = {0, kLn3, kLn2, 0, kLn5, 0};
const Vals kAttnV = {8, 0, 0, 8, 16, -8};

TEST_P(InterpOps, FlashAttn) {
  tj::Tracer t;
  Tensor q = t.input("q", dt(), {1, 1, 2, 2});
  Tensor k = t.input("k", dt(), {1, 1, 3, 2});
  Tensor v = t.input("v", dt(), {1, 1, 3, 2});
  auto out = run(t.finish({tj::flash_attn(q, k, v, 0.5)}),
                 {{"q", arr({1, 1, 2, 2}, {2, 0, 0, 2})}, {"k", arr({1, 1, 3, 2}, kAttnK)}, {"v", arr({1, 1, 3, 2}, kAttnV)}});
  expect_float(out[0], {1, 1, 2, 2}, {11, -3, 8, 0});
}

TEST_P(InterpOps, FlashAttnCausal) {
  tj::Tracer t;
  Tensor q = t.input("q", dt(), {1, 1, 2, 2});
  Tensor k = t.input("k", dt(), {1, 1, 3, 2});
  Tensor v = t.input("v", dt(), {1, 1, 3, 2});
  Tensor pos = t.input("pos", DType::i64, {});
  tj::Graph g = t.finish({tj::flash_attn_causal(q, k, v, pos, 0.5)});
  auto at = [&](double p) {
    return run(g, {{"q", arr({1, 1, 2, 2}, {2, 0, 0, 2})},
                   {"k", arr({1, 1, 3, 2}, kAttnK)},
                   {"v", arr({1, 1, 3, 2}, kAttnV)},
                   {"pos", NDArray::scalar(DType::i64, p)}});
  };
  // Offset 0: query 0 sees key 0 only; query 1 sees keys 0, 1 with weights
  // 3:1, giving (3*{8,0} + {0,8}) / 4 = {6, 2}.
  expect_float(at(0)[0], {1, 1, 2, 2}, {8, 0, 6, 2});
  // Offset 1: query 0 sees keys 0, 1 with weights 1:2, giving {8/3, 16/3};
  // query 1 sees all three.
  expect_float(at(1)[0], {1, 1, 2, 2}, {8.0 / 3, 16.0 / 3, 8, 0});
  // Offset 2 and beyond: nothing is masked.
  expect_float(at(5)[0], {1, 1, 2, 2}, {11, -3, 8, 0});
  // Offset -1: query 0 sees no key; by the kernel's documented choice that
  // row is NaN (as softmax of an all -inf row is). Query 1 sees key 0.
  expect_float(at(-1)[0], {1, 1, 2, 2}, {kNaN, kNaN, 8, 0});
}

// Grouped-query: query heads 0, 1 share kv head 0, heads 2, 3 share kv head 1
// (whose values are negated), so a head-to-group mix-up shows as a sign flip.
TEST_P(InterpOps, FlashAttnGroupedQuery) {
  Vals k2 = kAttnK, v2 = kAttnV;
  k2.insert(k2.end(), kAttnK.begin(), kAttnK.end());
  for (double x : kAttnV) v2.push_back(-x);
  tj::Tracer t;
  Tensor q = t.input("q", dt(), {1, 4, 1, 2});
  Tensor k = t.input("k", dt(), {1, 2, 3, 2});
  Tensor v = t.input("v", dt(), {1, 2, 3, 2});
  Tensor q1 = t.input("q1", dt(), {1, 2, 1, 2});
  Tensor k1 = t.input("k1", dt(), {1, 1, 3, 2});
  Tensor v1 = t.input("v1", dt(), {1, 1, 3, 2});
  auto out = run(t.finish({tj::flash_attn(q, k, v, 0.5), tj::flash_attn(q1, k1, v1, 0.5)}),
                 {{"q", arr({1, 4, 1, 2}, {2, 0, 0, 2, 2, 0, 0, 2})},
                  {"k", arr({1, 2, 3, 2}, k2)},
                  {"v", arr({1, 2, 3, 2}, v2)},
                  {"q1", arr({1, 2, 1, 2}, {2, 0, 0, 2})},
                  {"k1", arr({1, 1, 3, 2}, kAttnK)},
                  {"v1", arr({1, 1, 3, 2}, kAttnV)}});
  expect_float(out[0], {1, 4, 1, 2}, {11, -3, 8, 0, -11, 3, -8, 0});
  expect_float(out[1], {1, 2, 1, 2}, {11, -3, 8, 0});
}

// ---- graph walking -------------------------------------------------------------

// Values used several times, as an operand twice and as outputs, survive the
// interpreter's early freeing.
TEST_P(InterpOps, SharedValues) {
  tj::Tracer t;
  Tensor x = t.input("x", dt(), {2});
  Tensor y = tj::sqrt(x);
  auto out = run(t.finish({y * y, y + 1.0, y, x, y}), {{"x", arr({2}, {1, 4})}});
  expect_float(out[0], {2}, {1, 4});
  expect_float(out[1], {2}, {2, 3});
  expect_float(out[2], {2}, {1, 2});
  expect_float(out[3], {2}, {1, 4});
  expect_float(out[4], {2}, {1, 2});
}

// Symbolic sizes are bound from the arrays: [S,2] bound with [3,2].
TEST_P(InterpOps, SymbolicDims) {
  Dim S = Dim::symbol("S");
  tj::Tracer t;
  Tensor x = t.input("x", dt(), {S, 2});
  Tensor rowsum = tj::sum(x, {1});
  tj::Graph g = t.finish({x * 2.0 + 1.0, rowsum, tj::reshape(x, {-1}), tj::slice(x, 0, 1, S),
                          tj::iota(t, S, dt()) + rowsum, tj::causal_mask(t.scalar(0, DType::i64), S, S + 1, dt())});
  auto out = run(g, {{"x", arr({3, 2}, {0, 1, 2, 3, 4, 5})}});
  expect_float(out[0], {3, 2}, {1, 3, 5, 7, 9, 11});
  expect_float(out[1], {3}, {1, 5, 9});
  expect_float(out[2], {6}, {0, 1, 2, 3, 4, 5});
  expect_float(out[3], {2, 2}, {2, 3, 4, 5});
  expect_float(out[4], {3}, {1, 6, 11});
  expect_float(out[5], {3, 4}, {0, -kInf, -kInf, -kInf, 0, 0, -kInf, -kInf, 0, 0, 0, -kInf});
  // The same graph at another size.
  auto one = run(g, {{"x", arr({1, 2}, {7, 8})}});
  expect_float(one[0], {1, 2}, {15, 17});
  expect_float(one[3], {0, 2}, {});
}

// ---- input handling (compute-mode independent) ---------------------------------

tj::Graph two_input_graph() {
  tj::Tracer t;
  Tensor x = t.input("x", DType::f32, {2, 3});
  Tensor y = t.input("y", DType::f32, {3});
  return t.finish({x + y});
}

TEST(InterpInputs, MissingInputThrows) {
  tj::Graph g = two_input_graph();
  expect_error([&] { tj::interpret(g, {{"x", NDArray(DType::f32, {2, 3})}}); }, {"missing", "'y'", "f32[3]"});
}

TEST(InterpInputs, MissingParamThrows) {
  tj::Tracer t;
  Tensor x = t.input("x", DType::f32, {2});
  Tensor w = t.param("weight", DType::f32, {2});
  tj::Graph g = t.finish({x * w});
  expect_error([&] { tj::interpret(g, {{"x", NDArray(DType::f32, {2})}}); }, {"missing", "param", "'weight'"});
}

TEST(InterpInputs, WrongShapeThrows) {
  tj::Graph g = two_input_graph();
  NDArray y(DType::f32, {3});
  expect_error([&] { tj::interpret(g, {{"x", NDArray(DType::f32, {3, 2})}, {"y", y}}); }, {"'x'", "f32[2,3]", "f32[3,2]"});
  expect_error([&] { tj::interpret(g, {{"x", NDArray(DType::f32, {6})}, {"y", y}}); }, {"'x'", "f32[2,3]", "f32[6]"});
  expect_error([&] { tj::interpret(g, {{"x", NDArray(DType::i64, {2, 3})}, {"y", y}}); }, {"'x'", "f32[2,3]", "i64[2,3]"});
}

TEST(InterpInputs, UnknownInputThrows) {
  tj::Graph g = two_input_graph();
  expect_error(
      [&] {
        tj::interpret(g, {{"x", NDArray(DType::f32, {2, 3})}, {"y", NDArray(DType::f32, {3})}, {"z", NDArray(DType::f32, {1})}});
      },
      {"unknown", "'z'"});
}

// Any floating array may feed a floating input; it is read in the compute dtype.
TEST(InterpInputs, FloatArraysOfOtherWidthsAreAccepted) {
  tj::Graph g = two_input_graph();
  auto out = tj::interpret(g, {{"x", NDArray::from(DType::f64, {2, 3}, {0.5, 1, 2, 3, 4, 5})},
                               {"y", NDArray::from(DType::bf16, {3}, {1, 2, 3})}});
  expect_dtype(out[0], DType::f32);
  expect_array(out[0], {2, 3}, {1.5, 3, 5, 4, 6, 8}, 0.0);
}

TEST(InterpInputs, SharedSymbolMustAgree) {
  Dim S = Dim::symbol("S");
  tj::Tracer t;
  Tensor x = t.input("x", DType::f32, {S, 2});
  Tensor y = t.input("y", DType::f32, {S});
  tj::Graph g = t.finish({x + tj::unsqueeze(y, {-1})});
  auto out = tj::interpret(g, {{"x", NDArray::from(DType::f32, {3, 2}, {0, 1, 2, 3, 4, 5})},
                               {"y", NDArray::from(DType::f32, {3}, {10, 20, 30})}});
  expect_array(out[0], {3, 2}, {10, 11, 22, 23, 34, 35}, 0.0);
  expect_error([&] { tj::interpret(g, {{"x", NDArray(DType::f32, {3, 2})}, {"y", NDArray(DType::f32, {4})}}); },
               {"'y'", "S"});
}

TEST(InterpInputs, DerivedDimIsChecked) {
  Dim S = Dim::symbol("S");
  tj::Tracer t;
  Tensor x = t.input("x", DType::f32, {S});
  Tensor y = t.input("y", DType::f32, {S + 1});
  tj::Graph g = t.finish({tj::sum(x, {0}) + tj::sum(y, {0})});
  auto out = tj::interpret(g, {{"x", NDArray::from(DType::f32, {2}, {1, 2})},
                               {"y", NDArray::from(DType::f32, {3}, {3, 4, 5})}});
  expect_array(out[0], {}, {15}, 0.0);
  expect_error([&] { tj::interpret(g, {{"x", NDArray(DType::f32, {2})}, {"y", NDArray(DType::f32, {4})}}); },
               {"'y'", "expected", "f32[4]"});
}

// Integers are held in the compute type: beyond 2^24 only f64 is exact.
// Integers are exact in both compute modes, to the last bit of an i64.
TEST(InterpInputs, IntegersExactInEitherComputeMode) {
  tj::Tracer t;
  Tensor n = t.input("n", DType::i64, {2});
  tj::Graph g = t.finish({n + t.scalar(1, DType::i64)});
  tj::Bindings b{{"n", NDArray(DType::i64, {2})}};
  b["n"].data<int64_t>()[0] = 16777217;
  b["n"].data<int64_t>()[1] = INT64_MAX - 1;
  for (DType c : {DType::f32, DType::f64}) {
    auto out = tj::interpret(g, b, {c});
    EXPECT_EQ(out[0].data<int64_t>()[0], 16777218);
    EXPECT_EQ(out[0].data<int64_t>()[1], INT64_MAX);
  }
}

// An i64 array for an i32 input must hold i32 values.
TEST(InterpInputs, IntegerOutOfRangeForDeclaredDtype) {
  tj::Tracer t;
  Tensor n = t.input("n", DType::i32, {1});
  tj::Graph g = t.finish({n + t.scalar(1, DType::i32)});
  tj::Bindings b{{"n", i64s({1}, {4294967296.0})}};
  expect_error([&] { tj::interpret(g, b); }, {"'n'", "4294967296", "out of range for i32"});
}

// Sizes are checked before anything is allocated or indexed.
TEST(InterpInputs, HugeAndEmptyArraysAreErrors) {
  expect_error([] { NDArray(DType::f32, {int64_t{1} << 62}); }, {"array too large", "2^63 bytes"});
  expect_error([] { NDArray(DType::f32, {99999999999, 99999999999}); }, {"array too large", "2^63 elements"});
  expect_error([] { NDArray(DType::f32, {2, -1}); }, {"negative dimension"});
  NDArray empty;
  NDArray copy = empty;  // a default array copies as one, reading nothing
  EXPECT_EQ(copy.raw(), nullptr);
  tj::Tracer t;
  Tensor n = t.input("n", DType::f32, {});
  tj::Graph g = t.finish({n + t.scalar(1, DType::f32)});
  expect_error([&] { tj::interpret(g, {{"n", NDArray()}}); }, {"'n'", "no data"});
  tj::Tracer z;
  Tensor e = z.input("e", DType::f32, {0, 3});
  tj::Graph ge = z.finish({sum(e, {0})});
  auto out = tj::interpret(ge, {{"e", NDArray(DType::f32, {0, 3})}});
  EXPECT_EQ(out[0].to_vector(), (std::vector<double>{0, 0, 0}));
}

TEST(InterpInputs, ComputeDtypeMustBeF32OrF64) {
  tj::Graph g = two_input_graph();
  expect_error([&] { tj::interpret(g, {}, {DType::bf16}); }, {"compute", "bf16"});
}

// The modes really differ: 1 + 1e-10 is 1 in f32.
TEST(InterpCompute, F32AndF64Differ) {
  tj::Tracer t;
  Tensor x = t.input("x", DType::f32, {1});
  tj::Graph g = t.finish({(x + 1.0) - 1.0});
  tj::Bindings b{{"x", NDArray::from(DType::f64, {1}, {1e-10})}};
  auto f32 = tj::interpret(g, b, {DType::f32});
  expect_dtype(f32[0], DType::f32);
  EXPECT_EQ(f32[0].get(0), 0.0);
  auto f64 = tj::interpret(g, b, {DType::f64});
  expect_dtype(f64[0], DType::f64);
  EXPECT_NEAR(f64[0].get(0), 1e-10, 1e-16);
}

// Known issue: in f64 mode a cast to bf16 (or f16) rounds twice, through f32
// (round_to_bf16 takes a double but converts it to float first), so a value
// just above a bf16 tie lands on the tie and then rounds to even.
// 1 + 2^-8 + 2^-40 is above the midpoint of 1 and 1 + 2^-7, so correct
// rounding gives 1 + 2^-7; the interpreter gives 1. Enable once fixed.
TEST(InterpCompute, F64ToHalfPrecisionRoundsOnce) {
  tj::Tracer t;
  Tensor x = t.input("x", DType::f64, {2});
  tj::Graph g = t.finish({tj::cast(x, DType::bf16), tj::cast(x, DType::f16)});
  auto out = tj::interpret(g, {{"x", NDArray::from(DType::f64, {2}, {1.0 + 0x1p-8 + 0x1p-40, 1.0 + 0x1p-11 + 0x1p-40})}},
                           {DType::f64});
  EXPECT_EQ(out[0].get(0), 1.0078125);
  EXPECT_EQ(out[1].get(1), 1.0009765625);
}

// Runtime errors name the op that failed.
TEST(InterpCompute, KernelErrorsNameTheNode) {
  tj::Tracer t;
  Tensor table = t.input("table", DType::f32, {2});
  Tensor ids = t.input("ids", DType::i64, {1});
  tj::Graph g = t.finish({tj::exp(tj::gather(table, ids))});
  expect_error([&] { tj::interpret(g, {{"table", NDArray(DType::f32, {2})}, {"ids", i64s({1}, {2})}}); },
               {"while interpreting", "gather", "index 2", "length 2"});
}

// ---- the ops added through their rows alone (src/ir/ops/) ---------------------

TEST_P(InterpOps, ErfAndExactGelu) {
  check_unary([](const Tensor& x) { return tj::erf(x); }, {0, 0.5, -1, kInf, kNaN}, {0, 0.5204998778130465, -0.8427007929497149, 1, kNaN});
  check_unary([](const Tensor& x) { return tj::gelu(x, false); }, {1, -1, 0}, {0.8413447460685429, -0.15865525393145707, 0});
  check_unary([](const Tensor& x) { return tj::gelu(x); }, {1, 0}, {0.8411919906082768, 0});
}

TEST_P(InterpOps, Rounding) {
  check_unary([](const Tensor& x) { return tj::floor(x); }, {-1.5, -0.5, 0.5, 2, kInf}, {-2, -1, 0, 2, kInf});
  check_unary([](const Tensor& x) { return tj::ceil(x); }, {-1.5, -0.5, 0.5, 2, -kInf}, {-1, 0, 1, 2, -kInf});
  // Halves to even.
  check_unary([](const Tensor& x) { return tj::round(x); }, {0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6, kNaN}, {0, 2, 2, 0, -2, 2, -3, kNaN});
}

TEST_P(InterpOps, SignAndRelu) {
  check_unary([](const Tensor& x) { return tj::sign(x); }, {-3, 0, 2, kNaN, -kInf}, {-1, 0, 1, kNaN, -1});
  check_unary([](const Tensor& x) { return tj::relu(x); }, {-1, 0, 2, kNaN, -kInf}, {0, 0, 2, kNaN, 0});
  tj::Tracer t;
  Tensor n = t.input("n", DType::i64, {4});
  auto out = run(t.finish({tj::sign(n), tj::relu(n)}), {{"n", i64s({4}, {-5, 0, 7, -1})}});
  expect_exact(out[0], DType::i64, {4}, {-1, 0, 1, -1});
  expect_exact(out[1], DType::i64, {4}, {0, 0, 7, 0});
}

TEST_P(InterpOps, Log1pExpm1Softplus) {
  check_unary([](const Tensor& x) { return tj::log1p(x); }, {0, 1e-10, 1, -1}, {0, 9.999999999500001e-11, kLn2, -kInf});
  check_unary([](const Tensor& x) { return tj::expm1(x); }, {0, 1e-10, 1, -kInf}, {0, 1.00000000005e-10, kE - 1, -1});
  // Stable at both ends: no overflow at 100, no cancellation at -30.
  check_unary([](const Tensor& x) { return tj::softplus(x); }, {0, 100, -30, 1}, {kLn2, 100, 9.357622968839737e-14, 1.3132616875182228});
}

TEST_P(InterpOps, LeakyReluAndHardswish) {
  check_unary([](const Tensor& x) { return tj::leaky_relu(x, 0.1); }, {-2, 3, 0, kNaN}, {-0.2, 3, 0, kNaN});
  check_unary([](const Tensor& x) { return tj::leaky_relu(x); }, {-100}, {-1});
  check_unary([](const Tensor& x) { return tj::hardswish(x); }, {-4, -1, 0, 1, 4, 2}, {0, -1.0 / 3, 0, 2.0 / 3, 4, 5.0 / 3});
}

// Floor remainder: the sign of the divisor; fmod: the sign of the dividend.
TEST_P(InterpOps, Mod) {
  tj::Tracer t;
  Tensor a = t.input("a", dt(), {6});
  Tensor b = t.input("b", dt(), {6});
  Tensor m = t.input("m", DType::i64, {5});
  Tensor n = t.input("n", DType::i64, {5});
  auto out = run(t.finish({tj::mod(a, b), tj::mod(a, b, true), tj::mod(m, n), tj::mod(m, n, true)}),
                 {{"a", arr({6}, {5, -5, 5, -5, 5.5, 0})},
                  {"b", arr({6}, {3, 3, -3, -3, 2, 3})},
                  {"m", i64s({5}, {5, -5, 5, -5, 7})},
                  {"n", i64s({5}, {3, 3, -3, -3, -1})}});
  expect_float(out[0], {6}, {2, 1, -1, -2, 1.5, 0});
  expect_float(out[1], {6}, {2, -2, 2, -2, 1.5, 0});
  expect_exact(out[2], DType::i64, {5}, {2, 1, -1, -2, 0});
  expect_exact(out[3], DType::i64, {5}, {2, -2, 2, -2, 0});
  tj::Tracer z;
  Tensor p = z.input("p", DType::i32, {1});
  tj::Graph g = z.finish({tj::mod(p, z.constant(DType::i32, {1}, {0}))});
  expect_error([&] { run(g, {{"p", NDArray::from(DType::i32, {1}, {3})}}); }, {"division by zero"});
}

TEST_P(InterpOps, Logic) {
  tj::Tracer t;
  Tensor a = t.input("a", DType::boolean, {4});
  Tensor b = t.input("b", DType::boolean, {2, 1});
  auto out = run(t.finish({tj::logical_and(a, b), tj::logical_or(a, b), tj::logical_not(a)}),
                 {{"a", NDArray::from(DType::boolean, {4}, {1, 1, 0, 0})}, {"b", NDArray::from(DType::boolean, {2, 1}, {1, 0})}});
  expect_exact(out[0], DType::boolean, {2, 4}, {1, 1, 0, 0, 0, 0, 0, 0});
  expect_exact(out[1], DType::boolean, {2, 4}, {1, 1, 1, 1, 1, 1, 0, 0});
  expect_exact(out[2], DType::boolean, {4}, {0, 0, 1, 1});
  tj::Tracer u;
  EXPECT_THROW(tj::logical_and(u.input("x", dt(), {2}), u.input("y", DType::boolean, {2})), tj::ShapeError);
}

// min(max(x, lo), hi): NaN stays, lo > hi gives hi; bounds broadcast.
TEST_P(InterpOps, Clip) {
  tj::Tracer t;
  Tensor x = t.input("x", dt(), {4});
  Tensor hi = t.input("hi", dt(), {2, 1});
  Tensor n = t.input("n", DType::i64, {3});
  auto out = run(t.finish({tj::clip(x, 0, 1), tj::clip(x, 2, 1), tj::clip(x, t.scalar(-1, dt()), hi),
                           tj::clip(n, t.scalar(0, DType::i64), t.scalar(10, DType::i64))}),
                 {{"x", arr({4}, {-2, 0.5, 3, kNaN})}, {"hi", arr({2, 1}, {1, 5})}, {"n", i64s({3}, {-4, 4, 40})}});
  expect_float(out[0], {4}, {0, 0.5, 1, kNaN});
  expect_float(out[1], {4}, {1, 1, 1, kNaN});
  expect_float(out[2], {2, 4}, {-1, 0.5, 1, kNaN, -1, 0.5, 3, kNaN});
  expect_exact(out[3], DType::i64, {3}, {0, 4, 10});
}

// The first index of the maximum; NaN counts as the maximum (the first wins).
TEST_P(InterpOps, Argmax) {
  tj::Tracer t;
  Tensor x = t.input("x", dt(), {3, 3});
  Tensor n = t.input("n", DType::i32, {1, 4});
  auto out = run(t.finish({tj::argmax(x, 1), tj::argmax(x, 0, true), tj::argmax(n, -1)}),
                 {{"x", arr({3, 3}, {1, 3, 3, kNaN, 5, kNaN, 2, -kInf, 7})}, {"n", NDArray::from(DType::i32, {1, 4}, {4, 9, 9, -1})}});
  expect_exact(out[0], DType::i64, {3}, {1, 0, 2});
  expect_exact(out[1], DType::i64, {1, 3}, {1, 1, 1});
  expect_exact(out[2], DType::i64, {1}, {1});
  tj::Tracer u;
  EXPECT_THROW(tj::argmax(u.input("e", dt(), {2, 0}), 1), tj::ShapeError);
}

}  // namespace

namespace tj {
namespace {

// Names the caller binds itself get no random values, and every other input
// gets the very values it gets without them (the stream skips their draws).
TEST(RandomInputs, GivenNamesKeepTheOthersValues) {
  Graph g = parse_graph(
      "graph g\ninput %a : f32[3,4]\nparam %w : f32[4,5]\ninput %m : bool[7]\nparam %norm : f32[5]\ninput %i : i64[2]\n"
      "input %x : f32[6]\nparam %t : f32[9,2]\n%0 = gather(%t, %i) {axis=0} : f32[2,2]\nreturn %0\n");
  RandomInputOptions all, some;
  all.seed = some.seed = 11;
  some.given = {"a", "m", "i"};
  Bindings full = random_inputs(g, all), part = random_inputs(g, some);
  for (const char* n : {"a", "m", "i"}) EXPECT_FALSE(part.count(n)) << n;
  for (const char* n : {"w", "norm", "x", "t"}) {
    ASSERT_TRUE(part.count(n)) << n;
    EXPECT_EQ(part.at(n).to_vector(), full.at(n).to_vector()) << n;
  }
}

}  // namespace
}  // namespace tj
