// tj::jit: guards (hit and miss for each kind, with the reason), the cache
// limit, bucketed dims (masked results equal the unpadded ones, outputs
// trimmed, sizes 0 and 1 specialized), and graph breaks (the same results as
// the C++ loop run eagerly).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "reference/random_inputs.h"
#include "support/scratch.h"
#include "tensorjit/jit.h"
#include "tensorjit/safetensors.h"

namespace tj {
namespace {

class Jit : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::use_scratch_cache("jit");
  }
};

NDArray filled(DType t, std::vector<int64_t> shape, uint64_t seed) {
  Rng r(seed);
  return uniform_array(t, std::move(shape), r);
}

double max_diff(const NDArray& a, const NDArray& b) {
  EXPECT_EQ(a.shape(), b.shape());
  auto x = a.to_vector(), y = b.to_vector();
  double m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

// y = x @ w (+ silu when flag 0 is set); value 1 is never read.
JitFn mlp(const NDArray& w) {
  return [w](JitArgs& a) {
    Tensor y = matmul(a.tensor(0), a.param("w", w));
    if (a.flag(0)) y = silu(y);
    return std::vector<Tensor>{y};
  };
}

// Weights bound by name from a safetensors file give what the same weights
// given as arrays give.
TEST_F(Jit, WeightsFromASafetensorsFile) {
  NDArray w = filled(DType::f32, {8, 4}, 1);
  std::string path = ::testing::TempDir() + "jit_weights.safetensors";
  write_safetensors(path, {{"w", w}});
  SafetensorsFile file(path);
  JitFunction from_file = jit("mlp_file", [&file](JitArgs& a) { return std::vector<Tensor>{matmul(a.tensor(0), a.param("w", file))}; });
  JitFunction from_array = jit("mlp", mlp(w));
  std::vector<NDArray> x{filled(DType::f32, {3, 8}, 2)};
  auto want = from_array(x, {false});
  auto got = from_file(x);
  EXPECT_EQ(max_diff(got[0], want[0]), 0);
  JitFunction missing = jit("missing", [&file](JitArgs& a) { return std::vector<Tensor>{a.tensor(0) + a.param("nope", file)}; });
  EXPECT_THROW(missing(x), Error);
}

// call_cached runs a hit and reports its entry; a miss runs and traces
// nothing. last_entry names the entry each call ran.
TEST_F(Jit, CallCachedRunsHitsOnly) {
  NDArray w = filled(DType::f32, {8, 4}, 1);
  JitFunction f = jit("mlp", mlp(w));
  std::vector<NDArray> x{filled(DType::f32, {3, 8}, 2)}, out;
  EXPECT_EQ(f.call_cached(std::vector<NDArray>(x), {true}, out), -1);
  EXPECT_EQ(f.stats().calls, 0);
  auto want = f(x, {true});
  EXPECT_EQ(f.last_entry(), 0);
  f(x, {false});
  EXPECT_EQ(f.last_entry(), 1);
  EXPECT_EQ(f.call_cached(std::vector<NDArray>(x), {true}, out), 0);
  EXPECT_EQ(f.last_entry(), 0);
  EXPECT_EQ(max_diff(out[0], want[0]), 0);
  std::vector<NDArray> rows{filled(DType::f32, {5, 8}, 3)};
  EXPECT_EQ(f.call_cached(std::move(rows), {true}, out), -1);  // a new size: a miss
  EXPECT_EQ(f.stats().compilations, 2);
  EXPECT_EQ(f.stats().hits, 1);
}

// grad_wrt: the value and its gradients, compiled with the forward; a new
// size recompiles; a function that breaks, or that returns no scalar, is
// an error.
TEST_F(Jit, GradientsOfAScalarFunction) {
  JitOptions o;
  o.grad_wrt = {0, 1};
  JitFunction f = jit("loss", [](JitArgs& a) { return std::vector<Tensor>{sum(tanh(matmul(a.tensor(0), a.tensor(1))), {0, 1})}; }, o);
  for (int64_t rows : {3, 5}) {
    NDArray x = filled(DType::f64, {rows, 4}, 1), w = filled(DType::f64, {4, 2}, 2);
    std::vector<NDArray> out = f(std::vector<NDArray>{x, w});
    ASSERT_EQ(out.size(), 3u);
    // d/dw[k][j] = sum_i x[i][k] (1 - tanh(x w)[i][j]^2), by hand
    for (int64_t k = 0; k < 4; ++k)
      for (int64_t j = 0; j < 2; ++j) {
        double want = 0;
        for (int64_t i = 0; i < rows; ++i) {
          double z = 0;
          for (int64_t m = 0; m < 4; ++m) z += x.get(i * 4 + m) * w.get(m * 2 + j);
          want += x.get(i * 4 + k) * (1 - std::tanh(z) * std::tanh(z));
        }
        EXPECT_NEAR(out[2].get(k * 2 + j), want, 1e-12);
      }
    EXPECT_EQ(out[1].shape(), x.shape());
  }
  EXPECT_EQ(f.stats().compilations, 2);
  JitFunction breaks = jit("breaks", [](JitArgs& a) {
    Tensor x = a.tensor(0);
    if (sum(x, {0}).item() > 0) x = x * 2.0;
    return std::vector<Tensor>{sum(x, {0})};
  }, o);
  EXPECT_THROW(breaks(std::vector<NDArray>{filled(DType::f64, {3}, 1), filled(DType::f64, {3}, 2)}), Error);
  JitOptions one;
  one.grad_wrt = {0};
  JitFunction vector = jit("vector", [](JitArgs& a) { return std::vector<Tensor>{a.tensor(0) * 2.0}; }, one);
  EXPECT_THROW(vector(std::vector<NDArray>{filled(DType::f64, {3}, 1)}), Error);
}

TEST_F(Jit, EachGuardKindHitsAndMisses) {
  NDArray w = filled(DType::f32, {8, 4}, 1);
  JitFunction f = jit("mlp", mlp(w));
  std::vector<NDArray> x{filled(DType::f32, {3, 8}, 2)};
  auto y1 = f(x, {true, int64_t{5}});
  EXPECT_EQ(f.stats().compilations, 1);
  EXPECT_TRUE(f.would_hit(x, {true, int64_t{6}})) << "value 1 was never read: no guard on it";
  f(x, {true, int64_t{6}});
  EXPECT_EQ(f.stats().hits, 1);

  EXPECT_FALSE(f.would_hit(x, {false, int64_t{5}}));  // a value read
  auto y2 = f(x, {false});
  EXPECT_EQ(f.stats().compilations, 2);
  EXPECT_GT(max_diff(y1[0], y2[0]), 1e-3) << "the flag changed nothing";

  std::vector<NDArray> rows{filled(DType::f32, {5, 8}, 3)};  // a size
  EXPECT_FALSE(f.would_hit(rows, {true}));
  f(rows, {true});
  std::vector<NDArray> f64{filled(DType::f64, {3, 8}, 2)};  // a dtype
  EXPECT_FALSE(f.would_hit(f64, {true}));
  std::vector<NDArray> rank3{filled(DType::f32, {1, 3, 8}, 2)};  // a rank
  EXPECT_FALSE(f.would_hit(rank3, {true}));
  std::vector<NDArray> two{x[0], x[0]};  // a count
  EXPECT_FALSE(f.would_hit(two, {true}));
  EXPECT_FALSE(f.would_hit(x, {})) << "a read value missing";
  EXPECT_TRUE(f.would_hit(x, {true}));
  EXPECT_TRUE(f.would_hit(rows, {true}));

  std::string e = f.explain();
  EXPECT_NE(e.find("values[0] == true"), std::string::npos) << e;
  EXPECT_NE(e.find("tensors[0]: f32[3,8]"), std::string::npos) << e;
  EXPECT_NE(e.find("values[0] == true failed (got false)"), std::string::npos) << e;
  EXPECT_NE(e.find("tensors[0].shape[0] == 3 failed (got 5)"), std::string::npos) << e;
  EXPECT_EQ(e.find("values[1]"), std::string::npos) << e;
}

TEST_F(Jit, CompiledMatchesTheInterpreterEntry) {
  NDArray w = filled(DType::f64, {8, 4}, 1);
  JitOptions eager;
  eager.compile = false;
  JitFunction f = jit("mlp", mlp(w)), g = jit("mlp", mlp(w), eager);
  std::vector<NDArray> x{filled(DType::f64, {3, 8}, 2)};
  EXPECT_LE(max_diff(f(x, {true})[0], g(x, {true})[0]), 1e-14);
}

TEST_F(Jit, CacheLimitWarnsAndRunsOnTheInterpreter) {
  NDArray w = filled(DType::f32, {8, 4}, 1);
  JitOptions o;
  o.cache_limit = 2;
  o.policy = DynamicPolicy::static_shapes;
  JitFunction f = jit("limited", mlp(w), o);
  JitOptions eager;
  eager.compile = false;
  JitFunction ref = jit("ref", mlp(w), eager);
  for (int64_t rows = 1; rows <= 4; ++rows) {
    std::vector<NDArray> x{filled(DType::f32, {rows, 8}, 7)};
    EXPECT_LE(max_diff(f(x, {false})[0], ref(x, {false})[0]), 1e-5);
  }
  EXPECT_EQ(f.stats().compilations, 2);
  EXPECT_EQ(f.stats().eager_calls, 2);
  EXPECT_NE(f.explain().find("cache limit 2 reached"), std::string::npos) << f.explain();
}

// Attention of one query over S keys, S bucketed: padded keys are masked
// with real_size, so the real result does not change.
JitFn attend() {
  return [](JitArgs& a) {
    Tensor q = a.tensor(0), k = a.tensor(1), v = a.tensor(2);  // [1,D], [S,D], [S,D]
    Tensor s = matmul(q, transpose(k));                        // [1,S]
    Tensor keep = lt(iota(a.tracer(), k.dim(0)), a.real_size(1, 0));
    Tensor p = softmax(where(keep, s, a.tracer().scalar(-INFINITY, s.dtype())));
    return std::vector<Tensor>{matmul(p, v), k * 2.0};
  };
}

TEST_F(Jit, BucketedDimsAreMaskedAndTrimmed) {
  JitOptions b;
  b.policy = DynamicPolicy::bucketed;
  JitFunction f = jit("attend", attend(), b);
  JitOptions st;
  st.policy = DynamicPolicy::static_shapes;
  JitFunction s = jit("attend_static", attend(), st);
  for (int64_t S = 1; S <= 16; ++S) {
    std::vector<NDArray> args{filled(DType::f32, {1, 4}, 1), filled(DType::f32, {S, 4}, 2 + S), filled(DType::f32, {S, 4}, 40 + S)};
    auto got = f(args), want = s(args);
    ASSERT_EQ(got[1].shape(), (std::vector<int64_t>{S, 4})) << "output not trimmed to the real size";
    EXPECT_LE(max_diff(got[0], want[0]), 1e-6) << "S=" << S;
    EXPECT_EQ(max_diff(got[1], want[1]), 0) << "S=" << S;
  }
  // S=1 specialized; buckets 2, 4, 8, 16 (D=4 is one size shared by all three).
  EXPECT_EQ(f.stats().compilations, 5) << f.explain();
  EXPECT_EQ(s.stats().compilations, 8) << "the static function reaches its limit";
  std::string e = f.explain();
  EXPECT_NE(e.find("tensors[1]: f32[(8,16],(2,4]]"), std::string::npos) << e;
  EXPECT_NE(e.find("tensors[2].shape[0] == tensors[1].shape[0]"), std::string::npos) << e;
  EXPECT_NE(e.find("tensors[1]: f32[1,(2,4]]"), std::string::npos) << e;
  // The equality the trace assumed is a guard.
  std::vector<NDArray> odd{filled(DType::f32, {1, 4}, 1), filled(DType::f32, {12, 4}, 2), filled(DType::f32, {11, 4}, 3)};
  EXPECT_FALSE(f.would_hit(odd));
}

// Symbolic: one compilation for every size >= 2; automatic: static until a
// dim shows a second value, then that dim symbolic. Both equal static.
TEST_F(Jit, SymbolicAndAutomaticDims) {
  JitOptions sym, st;
  sym.policy = DynamicPolicy::symbolic;
  st.policy = DynamicPolicy::static_shapes;
  st.cache_limit = 64;
  JitFunction f = jit("attend_symbolic", attend(), sym), a = jit("attend_auto", attend()), s = jit("attend_static", attend(), st);
  for (int64_t S : {2, 7, 64, 500, 1, 3}) {
    std::vector<NDArray> args{filled(DType::f32, {1, 4}, 1), filled(DType::f32, {S, 4}, 2 + S), filled(DType::f32, {S, 4}, 40 + S)};
    auto want = s(args);
    auto got = f(args), got_auto = a(args);
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_LE(max_diff(got[k], want[k]), 1e-6) << "S=" << S;
      EXPECT_LE(max_diff(got_auto[k], want[k]), 1e-6) << "S=" << S;
    }
  }
  EXPECT_EQ(f.stats().compilations, 2) << "sizes >= 2, and 1 specialized\n" << f.explain();
  EXPECT_EQ(a.stats().compilations, 3) << "S=2 static, then symbolic, and 1 specialized\n" << a.explain();
  std::string e = a.explain();
  EXPECT_NE(e.find("with tensors[1].shape[0] tensors[2].shape[0] symbolic"), std::string::npos) << e;
  EXPECT_NE(e.find("tensors[1]: f32[>=2,4]"), std::string::npos) << e;
  EXPECT_NE(f.explain().find("tensors[1]: f32[1,>=2]"), std::string::npos) << f.explain();
}

// On the interpreter (sums in order, masked terms exactly zero) bucketing
// leaves the real positions' results bit-identical.
TEST_F(Jit, BucketedResultsAreIdenticalOnTheInterpreter) {
  JitOptions b, st;
  b.policy = DynamicPolicy::bucketed;
  b.compile = st.compile = false;
  st.policy = DynamicPolicy::static_shapes;
  JitFunction f = jit("attend_b", attend(), b), s = jit("attend_s", attend(), st);
  for (int64_t S : {3, 5, 6, 11}) {
    std::vector<NDArray> args{filled(DType::f32, {1, 4}, 1), filled(DType::f32, {S, 4}, 2 + S), filled(DType::f32, {S, 4}, 40 + S)};
    auto got = f(args), want = s(args);
    for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k].to_vector(), want[k].to_vector()) << "S=" << S;
  }
}

TEST_F(Jit, BucketsOfMultiples) {
  Buckets m{16};
  EXPECT_EQ(m.of(2), 16);
  EXPECT_EQ(m.of(16), 16);
  EXPECT_EQ(m.of(17), 32);
  Buckets p;
  EXPECT_EQ(p.of(5), 8);
  EXPECT_EQ(p.of(8), 8);
  JitOptions o;
  o.policy = DynamicPolicy::bucketed;
  o.buckets.multiple = 8;
  JitFunction f = jit("attend8", attend(), o);
  for (int64_t S : {3, 8, 9, 16}) {
    std::vector<NDArray> args{filled(DType::f32, {1, 4}, 1), filled(DType::f32, {S, 4}, 2), filled(DType::f32, {S, 4}, 3)};
    f(args);
  }
  EXPECT_EQ(f.stats().compilations, 2) << f.explain();
}

// y <- tanh(y @ W) until max |dy| < tol, with item() deciding: one graph
// per iteration, the same numbers as the loop in plain C++.
JitFn iterate(const NDArray& W, double tol) {
  return [W, tol](JitArgs& a) {
    Tensor y = a.tensor(0), w = a.param("W", W);
    for (int i = 0; i < 200; ++i) {
      Tensor next = tanh(matmul(y, w));
      Tensor delta = amax(abs(next - y), {0, 1});
      y = next;
      if (delta.item() < tol) break;
    }
    return std::vector<Tensor>{y};
  };
}

TEST_F(Jit, GraphBreaksGiveTheEagerResult) {
  const int64_t n = 16;
  NDArray W = filled(DType::f64, {n, n}, 5);
  for (int64_t i = 0; i < W.numel(); ++i) W.set(i, W.to_vector()[static_cast<size_t>(i)] * 0.2);
  NDArray y0 = filled(DType::f64, {1, n}, 6);
  // Eagerly, in C++.
  std::vector<double> y = y0.to_vector(), wv = W.to_vector();
  int iters = 0;
  for (int i = 0; i < 200; ++i) {
    std::vector<double> next(n);
    double d = 0;
    for (int64_t c = 0; c < n; ++c) {
      double acc = 0;
      for (int64_t k = 0; k < n; ++k) acc += y[static_cast<size_t>(k)] * wv[static_cast<size_t>(k * n + c)];
      next[static_cast<size_t>(c)] = std::tanh(acc);
      d = std::max(d, std::abs(next[static_cast<size_t>(c)] - y[static_cast<size_t>(c)]));
    }
    y = next;
    ++iters;
    if (d < 1e-9) break;
  }
  ASSERT_GT(iters, 3);
  ASSERT_LT(iters, 200);
  JitFunction f = jit("iterate", iterate(W, 1e-9));
  for (int call = 0; call < 2; ++call) {
    std::vector<NDArray> args{y0};
    auto out = f(args);
    auto got = out[0].to_vector();
    for (int64_t c = 0; c < n; ++c) EXPECT_NEAR(got[static_cast<size_t>(c)], y[static_cast<size_t>(c)], 1e-12);
  }
  EXPECT_EQ(f.stats().graph_breaks, 2 * iters);
  EXPECT_LE(f.stats().compilations, 2) << "each iteration's graph has the same text: compiled once";
  std::string e = f.explain();
  EXPECT_NE(e.find("graph break 1: item() of"), std::string::npos) << e;
  EXPECT_NE(e.find("graph break at "), std::string::npos) << e;  // with its source location
  JitExplanation x = f.explanation();
  ASSERT_FALSE(x.break_sites.empty());
  EXPECT_NE(x.break_sites[0].first.find("jit_test.cpp:"), std::string::npos);
  int64_t reads = 0;
  for (const auto& [site, count] : x.break_sites) reads += count;
  EXPECT_EQ(reads, f.stats().graph_breaks);
  EXPECT_NE(e.find("jit_test.cpp"), std::string::npos) << e;
  EXPECT_NE(e.find("item() of"), std::string::npos) << e;
}

TEST_F(Jit, ABreakInABucketedTraceRetracesStatic) {
  JitOptions b;
  b.policy = DynamicPolicy::bucketed;
  JitFunction f = jit("positive", [](JitArgs& a) {
    Tensor x = a.tensor(0);
    Tensor s = sum(x, {0});
    return std::vector<Tensor>{s.item() > 0 ? x * 2.0 : x * -1.0};
  }, b);
  std::vector<NDArray> args{NDArray::from(DType::f64, {3}, {1, 2, 3})};
  EXPECT_EQ(f(args)[0].to_vector(), (std::vector<double>{2, 4, 6}));
  std::vector<NDArray> neg{NDArray::from(DType::f64, {3}, {-1, -2, 0})};
  EXPECT_EQ(f(neg)[0].to_vector(), (std::vector<double>{1, 2, -0.0}));
  EXPECT_NE(f.explain().find("traced again with static shapes"), std::string::npos) << f.explain();
}

JitOptions bucketed() {
  JitOptions b;
  b.policy = DynamicPolicy::bucketed;
  return b;
}

std::vector<NDArray> ramp(int64_t n) {
  NDArray x(DType::f64, {n});
  for (int64_t i = 0; i < n; ++i) x.set(i, static_cast<double>(i + 1));
  return {x};
}

// Review cases: a size equal to its bucket at trace time, padding left by
// an earlier call, ops that padding would change.
TEST_F(Jit, PaddingIsFreshAndHazardsFallBackToStatic) {
  JitFunction twice = jit("twice", [](JitArgs& a) { return std::vector<Tensor>{a.tensor(0) * 2.0}; }, bucketed());
  twice(ramp(8));
  EXPECT_EQ(twice(ramp(5))[0].to_vector(), (std::vector<double>{2, 4, 6, 8, 10}));
  JitFunction total = jit("total", [](JitArgs& a) { return std::vector<Tensor>{sum(a.tensor(0), {0})}; }, bucketed());
  EXPECT_EQ(total(ramp(7))[0].to_vector()[0], 28);
  EXPECT_EQ(total(ramp(5))[0].to_vector()[0], 15) << "padding from the previous call";
  EXPECT_EQ(total.stats().compilations, 1);

  JitFunction cat = jit("cat", [](JitArgs& a) { return std::vector<Tensor>{concat({a.tensor(0), a.tensor(0)}, 0)}; }, bucketed());
  EXPECT_EQ(cat(ramp(3))[0].to_vector(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  EXPECT_NE(cat.explain().find("concatenates along a bucketed axis"), std::string::npos) << cat.explain();
  JitFunction last = jit("last", [](JitArgs& a) {
    Tensor x = a.tensor(0);
    return std::vector<Tensor>{slice(x, 0, x.dim(0) - 1, x.dim(0))};
  }, bucketed());
  EXPECT_EQ(last(ramp(3))[0].to_vector(), (std::vector<double>{3}));
  JitFunction first6 = jit("first6", [](JitArgs& a) { return std::vector<Tensor>{slice(a.tensor(0), 0, 0, 6)}; }, bucketed());
  first6(ramp(7));
  EXPECT_EQ(first6(ramp(5))[0].to_vector(), (std::vector<double>{1, 2, 3, 4, 5})) << "no padding read past the real size";
  JitFunction avg = jit("avg", [](JitArgs& a) { return std::vector<Tensor>{mean(a.tensor(0), {0})}; }, bucketed());
  EXPECT_EQ(avg(ramp(3))[0].to_vector()[0], 2);
}

TEST_F(Jit, GraphBreaksKeepTheCallersArrays) {
  // A size input read after a break, in a static trace.
  JitFunction f = jit("sized", [](JitArgs& a) {
    Tensor s = sum(a.tensor(0) * 2.0, {0});
    Tensor n = cast(a.real_size(0, 0), DType::f64);
    double v = (s + n).item();
    return std::vector<Tensor>{a.tensor(0) * v};
  });
  EXPECT_EQ(f(ramp(2))[0].to_vector(), (std::vector<double>{8, 16}));  // (2*3 + 2) * x
  // A failing graph leaves the caller's arrays in place.
  JitFunction g = jit("oob", [](JitArgs& a) {
    Tensor i = a.tracer().constant(DType::i64, {1}, {7});
    double v = sum(gather(a.tensor(0), i), {0}).item();
    return std::vector<Tensor>{a.tensor(0) * v};
  });
  std::vector<NDArray> args = ramp(3);
  EXPECT_THROW(g(args), Error);
  EXPECT_EQ(args[0].to_vector(), (std::vector<double>{1, 2, 3}));
  // A graph writing a cache in place does not change a value still held.
  JitFunction k = jit("kv", [](JitArgs& a) {
    Tensor c = a.tensor(0);
    Tensor c2 = kv_write(c, a.tensor(1), a.tensor(2), 0);
    (void)sum(c2, {0}).item();
    return std::vector<Tensor>{c, c2};
  });
  std::vector<NDArray> kargs{NDArray::from(DType::f32, {4}, {1, 2, 3, 4}), NDArray::from(DType::f32, {1}, {9}), NDArray::scalar(DType::i64, 1)};
  auto out = k(kargs);
  EXPECT_EQ(out[0].to_vector(), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(out[1].to_vector(), (std::vector<double>{1, 9, 3, 4}));
}

// Called with its arguments given up (an rvalue vector), a function's
// donated cache moves into its output: the same array, updated in place,
// holding what a call that keeps its arguments returns as a copy.
TEST_F(Jit, GivenCachesMoveIntoTheirOutputs) {
  for (DynamicPolicy p : {DynamicPolicy::static_shapes, DynamicPolicy::symbolic}) {
    JitOptions o;
    o.dims = {{0, 0, p}};
    JitFunction f = jit(p == DynamicPolicy::symbolic ? "kv_given_symbolic" : "kv_given", [](JitArgs& a) {
      Tensor c2 = kv_write(a.tensor(0), a.tensor(1), a.tensor(2), 0);
      return std::vector<Tensor>{sum(c2 * 2.0, {0}), c2};
    }, o);
    auto args = [](int64_t at) {
      return std::vector<NDArray>{NDArray::from(DType::f32, {4}, {1, 2, 3, 4}), NDArray::from(DType::f32, {1}, {9}),
                                  NDArray::scalar(DType::i64, static_cast<double>(at))};
    };
    for (int64_t at : {1, 3}) {
      std::vector<NDArray> kept = args(at);
      auto want = f(kept);
      EXPECT_NE(want[1].raw(), kept[0].raw());  // kept: the output is a copy
      std::vector<NDArray> given = args(at);
      const void* cache = given[0].raw();
      auto got = f(std::move(given));
      EXPECT_EQ(got[1].raw(), cache);
      EXPECT_EQ(got[1].to_vector(), want[1].to_vector());
      EXPECT_EQ(got[0].to_vector(), want[0].to_vector());
    }
    EXPECT_EQ(f.stats().compilations, 1);
  }
}

TEST_F(Jit, BadCallsAreReported) {
  NDArray w = filled(DType::f32, {8, 4}, 1);
  JitFunction f = jit("mlp", mlp(w));
  EXPECT_THROW(f(std::vector<NDArray>{}, {true}), Error);                                   // no tensor 0
  EXPECT_THROW(f(std::vector<NDArray>{filled(DType::f32, {3, 8}, 2)}), Error);              // no value 0
  EXPECT_THROW(f(std::vector<NDArray>{filled(DType::f32, {3, 7}, 2)}, {true}), ShapeError);  // matmul shapes
  JitOptions o;
  o.cache_limit = 0;
  EXPECT_THROW(jit("zero", mlp(w), o), Error);
  Tracer t;
  Tensor x = t.input("x", DType::f32, {2});
  EXPECT_THROW(sum(x, {0}).item(), Error) << "no graph breaks outside tj::jit";
}

// A call that fails leaves the function as it was: [3,7] is refused, and a
// shape that worked before still works (the dim it wanted dynamic is not).
TEST_F(Jit, ARejectedCallChangesNothing) {
  NDArray w = filled(DType::f32, {8, 4}, 1);
  JitFunction f = jit("mlp", mlp(w));
  auto first = f(std::vector<NDArray>{filled(DType::f32, {3, 8}, 2)}, {false});
  EXPECT_THROW(f(std::vector<NDArray>{filled(DType::f32, {3, 7}, 2)}, {false}), ShapeError);
  auto again = f(std::vector<NDArray>{filled(DType::f32, {1, 8}, 3)}, {false});
  EXPECT_EQ(again[0].shape(), (std::vector<int64_t>{1, 4}));
  auto same = f(std::vector<NDArray>{filled(DType::f32, {3, 8}, 2)}, {false});
  EXPECT_EQ(max_diff(same[0], first[0]), 0.0);
}

}  // namespace
}  // namespace tj
