// tj::while_loop and tj::cond: traced into one graph with regions, printed
// and parsed back, verified, and interpreted with the results of the same
// control flow written in C++.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/compile.h"
#include "ir/text.h"
#include "ir/verifier.h"
#include "reference/interpreter.h"
#include "tensorjit/tensor.h"

namespace tj {
namespace {

// y <- tanh(y @ W) while max|dy| >= tol; the state is (y, dy).
Graph tanh_loop(int64_t n, double tol) {
  Tracer t("loop");
  Tensor y0 = t.input("y", DType::f64, {1, n}), w = t.param("W", DType::f64, {n, n});
  Tensor big = t.constant(DType::f64, {}, {1e300});
  auto out = while_loop([&](const std::vector<Tensor>& s) { return ge(s[1], t.scalar(tol, DType::f64)); },
                        [&](const std::vector<Tensor>& s) {
                          Tensor next = tanh(matmul(s[0], w));
                          return std::vector<Tensor>{next, amax(abs(next - s[0]), {0, 1})};
                        },
                        {y0, big});
  return t.finish({out[0], out[1]});
}

TEST(ControlFlow, WhileLoopMatchesTheCppLoop) {
  const int64_t n = 8;
  Graph g = tanh_loop(n, 1e-10);
  verify(g);
  std::string text = print_graph(g);
  EXPECT_NE(text.find("graph loop.while"), std::string::npos) << text;
  EXPECT_NE(text.find("while_loop("), std::string::npos) << text;
  Graph back = parse_graph(text);
  verify(back);
  EXPECT_EQ(print_graph(back), text);

  NDArray W(DType::f64, {n, n}), y(DType::f64, {1, n});
  for (int64_t i = 0; i < n * n; ++i) W.set(i, std::sin(static_cast<double>(i)) * 0.3);
  for (int64_t i = 0; i < n; ++i) y.set(i, std::cos(static_cast<double>(i)));
  auto got = interpret(back, {{"y", y}, {"W", W}}, {DType::f64});
  std::vector<double> v = y.to_vector(), w = W.to_vector();
  double d = 1e300;
  while (d >= 1e-10) {
    std::vector<double> next(static_cast<size_t>(n));
    d = 0;
    for (int64_t c = 0; c < n; ++c) {
      double acc = 0;
      for (int64_t k = 0; k < n; ++k) acc += v[static_cast<size_t>(k)] * w[static_cast<size_t>(k * n + c)];
      next[static_cast<size_t>(c)] = std::tanh(acc);
      d = std::max(d, std::abs(next[static_cast<size_t>(c)] - v[static_cast<size_t>(c)]));
    }
    v = next;
  }
  EXPECT_EQ(got[0].to_vector(), v);
  EXPECT_EQ(got[1].to_vector()[0], d);
}

// Compiled: the loop runs on the host over compiled regions, same result.
TEST(ControlFlow, CompiledLoopMatchesTheInterpreter) {
  const int64_t n = 8;
  Graph g = tanh_loop(n, 1e-10);
  NDArray W(DType::f64, {n, n}), y(DType::f64, {1, n});
  for (int64_t i = 0; i < n * n; ++i) W.set(i, std::sin(static_cast<double>(i)) * 0.3);
  for (int64_t i = 0; i < n; ++i) y.set(i, std::cos(static_cast<double>(i)));
  auto want = interpret(g, {{"y", y}, {"W", W}}, {DType::f64});
  Executable exe = tj::compile(g, {{"W", W}});
  ASSERT_TRUE(exe.stats().compiled);
  EXPECT_EQ(exe.stats().kernels, 2u) << "the loop's cond and body (nothing is computed around the loop)";
  Bindings in{{"y", y}};
  auto got = exe.run(in);
  auto a = got[0].to_vector(), b = want[0].to_vector();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-9);
  EXPECT_LT(got[1].to_vector()[0], 1e-10);
}

TEST(ControlFlow, CondTakesTheRightBranchAndCapturesOuterTensors) {
  Tracer t("branch");
  Tensor x = t.input("x", DType::f64, {3}), p = t.input("p", DType::f64, {}), k = t.input("k", DType::f64, {3});
  auto out = cond(p, [&](const std::vector<Tensor>& s) { return std::vector<Tensor>{s[0] * k, s[0] + 1.0}; },
                  [&](const std::vector<Tensor>& s) { return std::vector<Tensor>{-s[0], s[0] * 0.0}; }, {x});
  Graph g = t.finish({out[0], out[1]});
  verify(g);
  Graph back = parse_graph(print_graph(g));
  NDArray xv = NDArray::from(DType::f64, {3}, {1, 2, 3}), kv = NDArray::from(DType::f64, {3}, {2, 2, 2});
  auto yes = interpret(back, {{"x", xv}, {"p", NDArray::scalar(DType::f64, 1)}, {"k", kv}}, {DType::f64});
  EXPECT_EQ(yes[0].to_vector(), (std::vector<double>{2, 4, 6}));
  EXPECT_EQ(yes[1].to_vector(), (std::vector<double>{2, 3, 4}));
  auto no = interpret(back, {{"x", xv}, {"p", NDArray::scalar(DType::f64, 0)}, {"k", kv}}, {DType::f64});
  EXPECT_EQ(no[0].to_vector(), (std::vector<double>{-1, -2, -3}));
}

// Ops whose first operand (or every operand) is an outer tensor trace into
// the region too: `k * s` as `s * k`, and `k * k` computed in the branch
// (once traced into the outer graph, a new outer value each time the branch
// was traced, so that the regions' captures disagreed).
TEST(ControlFlow, OpsOnOuterTensorsTraceIntoTheRegion) {
  Tracer t("outer");
  Tensor x = t.input("x", DType::f64, {3}), p = t.input("p", DType::f64, {}), k = t.input("k", DType::f64, {3});
  auto out = cond(p, [&](const std::vector<Tensor>& s) { return std::vector<Tensor>{k * s[0] + k * k}; },
                  [&](const std::vector<Tensor>& s) { return std::vector<Tensor>{s[0]}; }, {x});
  Graph g = t.finish({out[0]});
  verify(g);
  EXPECT_EQ(g.size(), 4u) << print_graph(g);  // x, p, k and the cond: nothing computed outside
  NDArray xv = NDArray::from(DType::f64, {3}, {1, 2, 3}), kv = NDArray::from(DType::f64, {3}, {2, 2, 2});
  auto yes = interpret(g, {{"x", xv}, {"p", NDArray::scalar(DType::f64, 1)}, {"k", kv}}, {DType::f64});
  EXPECT_EQ(yes[0].to_vector(), (std::vector<double>{6, 8, 10}));
}

TEST(ControlFlow, BadRegionsAreRejected) {
  Tracer t("bad");
  Tensor x = t.input("x", DType::f64, {3});
  // The body changes the state's type.
  EXPECT_THROW(while_loop([&](const std::vector<Tensor>& s) { return sum(s[0], {0}); },
                          [&](const std::vector<Tensor>& s) { return std::vector<Tensor>{sum(s[0], {0})}; }, {x}),
               ShapeError);
  // The branches disagree.
  EXPECT_THROW(cond(t.scalar(1, DType::f64), [&](const std::vector<Tensor>& s) { return std::vector<Tensor>{s[0]}; },
                    [&](const std::vector<Tensor>& s) { return std::vector<Tensor>{sum(s[0], {0})}; }, {x}),
               ShapeError);
  // Text: a region used before it is defined, an index past the results.
  EXPECT_THROW(parse_graph("graph g\ninput %x : f64[]\n%0 = while_loop(%x) {carried=1, cond=@c, body=@b} : f64[]\nreturn %0\n"),
               ParseError);
  const char* two =
      "graph r\ninput %s0 : f64[]\nreturn %s0\n\n"
      "graph g\ninput %x : f64[]\n%0 = cond(%x, %x) {then=@r, else=@r} : f64[]\n%1 = result(%0) {index=1} : f64[]\nreturn %1\n";
  EXPECT_THROW(parse_graph(two), ParseError);
}

// A chain of conds whose then and else are the same region, as deep as
// regions may nest: verified, printed, interpreted and compiled in time
// linear in its length (each shared region once), and one level deeper is
// refused where the graph is built.
Graph cond_chain(int depth) {
  Region r;
  {
    Graph leaf("c0");
    ValueId a = leaf.add_input("a", {DType::f32, {}});
    leaf.set_outputs({leaf.add(Op::add, {a, leaf.add_const({DType::f32, {}}, std::vector<double>{1})})});
    r = std::make_shared<const Graph>(std::move(leaf));
  }
  for (int i = 1; i < depth; ++i) {
    Graph g("c" + std::to_string(i));
    ValueId a = g.add_input("a", {DType::f32, {}});
    g.set_outputs({g.add(Op::cond, {a, a}, {{"then", r}, {"else", r}})});
    r = std::make_shared<const Graph>(std::move(g));
  }
  Graph top("top");
  ValueId a = top.add_input("a", {DType::f32, {}});
  top.set_outputs({top.add(Op::cond, {a, a}, {{"then", r}, {"else", r}})});
  return top;
}

TEST(ControlFlow, SharedRegionsCostLinearTime) {
  Graph g = cond_chain(kMaxRegionNesting - 1);
  EXPECT_EQ(g.nesting(), kMaxRegionNesting);
  verify(g);
  std::string text = print_graph(g);
  Graph back = parse_graph(text);
  EXPECT_EQ(print_graph(back), text);
  Bindings in{{"a", NDArray::scalar(DType::f32, 2)}};
  EXPECT_EQ(interpret(back, in)[0].to_vector(), std::vector<double>{3});
  Executable exe = tj::compile(back, {});
  EXPECT_EQ(exe.run(in)[0].to_vector(), std::vector<double>{3});

  Region deepest = std::make_shared<const Graph>(std::move(g));  // nesting 64
  Graph over("over");
  ValueId a = over.add_input("a", {DType::f32, {}});
  EXPECT_THROW(over.add(Op::cond, {a, a}, {{"then", deepest}, {"else", deepest}}), Error);
}

}  // namespace
}  // namespace tj
