// Integer and cast edge cases: the interpreter and generated code agree bit
// for bit on every dtype pair, and both give the values docs/ir.md defines
// (wrapping integers, INT_MIN / -1 = INT_MIN, division by zero an error,
// saturating float-to-int casts with NaN -> 0), and the float8/float4 and
// 4- and 2-bit types.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "codegen/on_device.h"
#include "compiler/compile.h"
#include "ir/graph.h"
#include "ir/text.h"
#include "reference/random_inputs.h"
#include "support/scratch.h"
#include "tensorjit/error.h"

namespace tj {
namespace {

constexpr DType kTypes[] = {DType::f32, DType::f64, DType::i32, DType::i64, DType::boolean};

// Edge values of each dtype, as an array of that dtype.
NDArray edges(DType t) {
  std::vector<double> f = {0.0, -0.0, 1.5, -1.5, 2.5, -2.5, NAN, INFINITY, -INFINITY, 1e30, -1e30, 2147483647.5, -2147483648.5,
                           2147483648.0, -2147483649.0, 9223372036854775808.0, -9223372036854775808.0, -9.3e18, 1e10, 3.4e38};
  switch (t) {
    case DType::f32:
    case DType::f64: return NDArray::from(t, {static_cast<int64_t>(f.size())}, f);
    case DType::i32: {
      std::vector<int32_t> v = {0, 1, -1, 2, -2, 7, -7, INT32_MIN, INT32_MAX, INT32_MIN + 1, 123456789, -16777217};
      NDArray a(t, {static_cast<int64_t>(v.size())});
      std::memcpy(a.raw(), v.data(), a.nbytes());
      return a;
    }
    case DType::i64: {
      std::vector<int64_t> v = {0, 1, -1, 2, -2, 7, -7, INT64_MIN, INT64_MAX, INT64_MIN + 1, (int64_t{1} << 53) + 1, INT32_MIN,
                                int64_t{INT32_MAX} + 1, (int64_t{1} << 32) + 5, -(int64_t{1} << 40) - 3};
      NDArray a(t, {static_cast<int64_t>(v.size())});
      std::memcpy(a.raw(), v.data(), a.nbytes());
      return a;
    }
    default: return NDArray::from(t, {4}, {0, 1, 1, 0});
  }
}

// Element k of a as its bits, floats rounded to `t` first (the interpreter
// holds f32 values of an f64 computation in double).
uint64_t bits(const NDArray& a, int64_t k, DType t) {
  switch (a.dtype()) {
    case DType::f64: {
      double v = a.data<double>()[k];
      if (std::isnan(v)) return 1;  // any NaN is NaN
      if (t == DType::f32) {
        float f = static_cast<float>(v);
        uint32_t u;
        std::memcpy(&u, &f, 4);
        return u;
      }
      uint64_t u;
      std::memcpy(&u, &v, 8);
      return u;
    }
    case DType::f32: {
      float f = a.data<float>()[k];
      if (std::isnan(f)) return 1;
      if (t == DType::f64) return bits(NDArray::scalar(DType::f64, f), 0, t);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      return u;
    }
    case DType::i32: return static_cast<uint32_t>(a.data<int32_t>()[k]);
    case DType::i64: return static_cast<uint64_t>(a.data<int64_t>()[k]);
    default: return a.data<uint8_t>()[k];
  }
}

// Runs g on the interpreter and compiled, on the same inputs; expects
// bit-identical outputs and returns the compiled ones.
std::vector<NDArray> agree(const Graph& g, const Bindings& in) {
  bool f64 = false;
  for (const Node& n : g.nodes()) f64 |= n.type.dtype == DType::f64;
  auto want = interpret(g, in, {f64 ? DType::f64 : DType::f32});
  Executable exe = tj::compile(g, {});
  EXPECT_TRUE(exe.stats().compiled);
  Bindings copy = in;
  auto got = exe.run(copy);
  EXPECT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size() && o < want.size(); ++o) {
    DType t = g.type(g.outputs()[o]).dtype;
    EXPECT_EQ(got[o].numel(), want[o].numel());
    if (got[o].numel() != want[o].numel()) continue;
    for (int64_t k = 0; k < got[o].numel(); ++k)
      EXPECT_EQ(bits(got[o], k, t), bits(want[o], k, t))
          << "output " << o << " (" << dtype_name(t) << ") element " << k << ": compiled " << got[o].get(k) << ", interpreted "
          << want[o].get(k);
  }
  return got;
}

// Expects g to fail with tj::Error on the interpreter and compiled alike.
void both_throw(const Graph& g, const Bindings& in) {
  EXPECT_THROW(interpret(g, in), Error);
  Executable exe = tj::compile(g, {});
  Bindings copy = in;
  EXPECT_THROW(exe.run(copy), Error);
}

class EdgeSemantics : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::use_scratch_cache("edges");
  }
  void SetUp() override { TJ_SKIP_WITHOUT_TEST_DEVICE(); }
};

// Every cast between f32 f64 i32 i64 bool, from every edge value.
TEST_F(EdgeSemantics, CastsAgreeForEveryDtypePair) {
  for (DType from : kTypes) {
    SCOPED_TRACE(std::string("from ") + std::string(dtype_name(from)));
    NDArray x = edges(from);
    Graph g("casts");
    ValueId in = g.add_input("x", {from, {x.shape()[0]}});
    std::vector<ValueId> outs;
    for (DType to : kTypes) outs.push_back(g.add(Op::cast, {in}, {{"to", to}}));
    g.set_outputs(outs);
    auto got = agree(g, {{"x", x}});
    if (from != DType::f64) continue;
    // nan, inf, -inf, 1e30, -1e30 saturate (NaN -> 0), for i32 (output 2) and i64 (output 3).
    const int64_t at[] = {6, 7, 8, 9, 10};
    const int32_t want32[] = {0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN};
    const int64_t want64[] = {0, INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN};
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(got[2].data<int32_t>()[at[i]], want32[i]);
      EXPECT_EQ(got[3].data<int64_t>()[at[i]], want64[i]);
    }
    EXPECT_EQ(got[2].data<int32_t>()[5], -2);  // truncation toward zero
    EXPECT_EQ(got[2].data<int32_t>()[11], INT32_MAX);  // 2147483647.5
    EXPECT_EQ(got[2].data<int32_t>()[12], INT32_MIN);  // -2147483648.5
    EXPECT_EQ(got[4].data<uint8_t>()[6], 1);  // NaN != 0
  }
}

// relu, max, min and clip by constants over every edge value, bit for bit:
// the signs of zeros and NaN. Generated code takes two or three selects
// where a bound is a constant other than NaN and the zero a tie must not
// give (tj_max, tj_clip), the full form otherwise (-0 below, +0 above, NaN).
TEST_F(EdgeSemantics, ClampsByConstantsKeepZeroSignsAndNaN) {
  for (DType t : {DType::f32, DType::f64}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    NDArray e = edges(t);
    Graph g("clamps");
    ValueId x = g.add_input("e", {t, {e.shape()[0]}});
    auto c = [&](double v) { return g.add_const({t, {}}, std::vector<double>{v}); };
    std::vector<ValueId> outs = {g.add(Op::relu, {x}),
                                 g.add(Op::max, {x, c(0.0)}),
                                 g.add(Op::max, {x, c(-0.0)}),
                                 g.add(Op::min, {x, c(0.0)}),
                                 g.add(Op::min, {x, c(-0.0)}),
                                 g.add(Op::max, {x, c(NAN)}),
                                 g.add(Op::clip, {x, c(0.0), c(6.0)}),
                                 g.add(Op::clip, {x, c(-1.5), c(1.5)}),
                                 g.add(Op::clip, {x, c(-0.0), c(2.5)}),
                                 g.add(Op::clip, {x, c(-2.5), c(0.0)}),
                                 g.add(Op::clip, {x, c(2.5), c(-2.5)}),
                                 g.add(Op::clip, {x, c(-INFINITY), c(NAN)})};
    g.set_outputs(outs);
    agree(g, {{"e", e}});
  }
}

// add sub mul div max min neg abs over every pair of edge values, and a sum
// that wraps: two's complement in the result's width.
TEST_F(EdgeSemantics, IntegerArithmeticWraps) {
  for (DType t : {DType::i32, DType::i64}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    NDArray e = edges(t);
    int64_t n = e.shape()[0];
    NDArray a = e, b = e;
    // Divisors without zero: division by zero is tested on its own.
    NDArray nz(t, {n - 1});
    for (int64_t k = 1; k < n; ++k) {
      if (t == DType::i32) nz.data<int32_t>()[k - 1] = e.data<int32_t>()[k];
      else nz.data<int64_t>()[k - 1] = e.data<int64_t>()[k];
    }
    Graph g("ints");
    ValueId x = g.add(Op::reshape, {g.add_input("a", {t, {n}})}, {{"shape", Shape{n, 1}}});
    ValueId y = g.add(Op::reshape, {g.add_input("b", {t, {n}})}, {{"shape", Shape{1, n}}});
    ValueId d = g.add(Op::reshape, {g.add_input("d", {t, {n - 1}})}, {{"shape", Shape{1, n - 1}}});
    std::vector<ValueId> outs;
    for (Op op : {Op::add, Op::sub, Op::mul, Op::max, Op::min}) outs.push_back(g.add(op, {x, y}));
    outs.push_back(g.add(Op::div, {x, d}));
    outs.push_back(g.add(Op::neg, {x}));
    outs.push_back(g.add(Op::abs, {x}));
    outs.push_back(g.add(Op::sum, {x}, {{"axes", std::vector<int64_t>{0}}}));
    g.set_outputs(outs);
    auto got = agree(g, {{"a", a}, {"b", b}, {"d", nz}});
    auto at = [&](const NDArray& r, int64_t k) { return t == DType::i32 ? int64_t{r.data<int32_t>()[k]} : r.data<int64_t>()[k]; };
    int64_t mn = t == DType::i32 ? INT32_MIN : INT64_MIN, mx = t == DType::i32 ? INT32_MAX : INT64_MAX;
    // Rows are a's edges (index 7: MIN, 8: MAX), columns b's (1: 1, 2: -1).
    EXPECT_EQ(at(got[0], 8 * n + 1), mn);        // MAX + 1
    EXPECT_EQ(at(got[1], 7 * n + 1), mx);        // MIN - 1
    EXPECT_EQ(at(got[2], 8 * n + 3), -2);        // MAX * 2
    EXPECT_EQ(at(got[5], 7 * (n - 1) + 1), mn);  // MIN / -1 (d's column 1 is -1)
    EXPECT_EQ(at(got[5], 6 * (n - 1) + 2), -3);  // -7 / 2 truncates
    EXPECT_EQ(at(got[6], 7), mn);                // -MIN
    EXPECT_EQ(at(got[7], 7), mn);                // abs(MIN)
  }
}

TEST_F(EdgeSemantics, IntegerDivisionByZeroIsAnErrorInBoth) {
  for (DType t : {DType::i32, DType::i64}) {
    Graph g("div0");
    ValueId a = g.add_input("a", {t, {2}});
    ValueId b = g.add_input("b", {t, {2}});
    g.set_outputs({g.add(Op::div, {a, b})});
    Bindings in{{"a", NDArray::from(t, {2}, {5, -3})}, {"b", NDArray::from(t, {2}, {1, 0})}};
    EXPECT_THROW(interpret(g, in), Error);
    Executable exe = tj::compile(g, {});
    Bindings copy = in;
    try {
      exe.run(copy);
      ADD_FAILURE() << "compiled division by zero did not fail";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("division by zero"), std::string::npos) << e.what();
    }
  }
}

// i64 -> i32 keeps the low 32 bits; a bool is 0 or 1 whatever it came from.
TEST_F(EdgeSemantics, IntegerNarrowingWraps) {
  Graph g("narrow");
  ValueId x = g.add_input("x", {DType::i64, {3}});
  g.set_outputs({g.add(Op::cast, {x}, {{"to", DType::i32}})});
  NDArray in(DType::i64, {3});
  in.data<int64_t>()[0] = (int64_t{1} << 32) + 5;
  in.data<int64_t>()[1] = int64_t{INT32_MAX} + 1;
  in.data<int64_t>()[2] = -(int64_t{1} << 32) - 1;
  auto got = agree(g, {{"x", in}});
  EXPECT_EQ(got[0].data<int32_t>()[0], 5);
  EXPECT_EQ(got[0].data<int32_t>()[1], INT32_MIN);
  EXPECT_EQ(got[0].data<int32_t>()[2], -1);
}

// A gather whose table axis has length 1 reads row 0 for any valid index:
// the compiled read drops the index, but not its bounds check
// (fuzz/findings/gather-length-1.tj).
TEST_F(EdgeSemantics, GatherChecksIndicesItsReadIgnores) {
  Graph g("gather1");
  ValueId table = g.add_input("t", {DType::f64, {1, 3}});
  ValueId idx = g.add_input("i", {DType::i64, {2}});
  g.set_outputs({g.add(Op::gather, {table, idx})});
  Bindings ok{{"t", NDArray::from(DType::f64, {1, 3}, {1, 2, 3})}, {"i", NDArray::from(DType::i64, {2}, {0, -1})}};
  auto got = agree(g, ok);
  EXPECT_EQ(got[0].to_vector(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  Bindings bad = ok;
  bad["i"] = NDArray::from(DType::i64, {2}, {0, 5});
  EXPECT_THROW(interpret(g, bad), Error);
  Executable exe = tj::compile(g, {});
  EXPECT_THROW(exe.run(bad), Error);

  // where() evaluates both branches: an index out of range in the branch
  // not taken is an error too, compiled as interpreted.
  Graph w("where_gather");
  ValueId t2 = w.add_input("t", {DType::f64, {1, 3}});
  ValueId i2 = w.add_input("i", {DType::i64, {2}});
  ValueId c = w.add_input("c", {DType::boolean, {}});
  ValueId gathered = w.add(Op::gather, {t2, i2});
  w.set_outputs({w.add(Op::where, {c, gathered, w.add_const({DType::f64, {}}, std::vector<double>{0})})});
  Bindings wb = bad;
  wb["c"] = NDArray::scalar(DType::boolean, 0);
  both_throw(w, wb);
}

// A gather read only by an output's copy (a free gather after the last
// kernel) still reports its index out of range (fuzz_compiled finding).
TEST_F(EdgeSemantics, IndexErrorsInOutputCopies) {
  Graph g("gather_out");
  ValueId x = g.add_input("x", {DType::f64, {1}});
  ValueId gt = g.add(Op::gt, {x, x});
  ValueId idx = g.add_const({DType::i64, {2}}, std::vector<double>{0, -2});
  g.set_outputs({g.add(Op::reshape, {g.add(Op::gather, {gt, idx})}, {{"shape", Shape{1, 2}}})});
  Bindings in{{"x", NDArray::from(DType::f64, {1}, {3})}};
  both_throw(g, in);
}

// A gather's constant indices inside their axis (an ONNX Resize's taps) are
// read without the bounds check (its store to tj_status kept the loop
// scalar); one out of range, or negative, keeps the check, and the first
// still fails as the interpreter does.
TEST_F(EdgeSemantics, ConstantIndicesInsideTheAxisAreReadUnchecked) {
  auto graph = [](const std::vector<double>& idx) {
    Graph g("resize_taps");
    ValueId x = g.add_input("x", {DType::f32, {3, 40}});
    ValueId i = g.add_const({DType::i64, {static_cast<int64_t>(idx.size())}}, idx);
    ValueId y = g.add(Op::gather, {x, i}, {{"axis", int64_t{1}}});
    g.set_outputs({g.add(Op::mul, {y, g.add_const({DType::f32, {}}, std::vector<double>{0.5})})});
    return g;
  };
  std::vector<double> idx(64);
  for (size_t k = 0; k < idx.size(); ++k) idx[k] = static_cast<double>(k * 5 % 40);
  Graph g = graph(idx);
  Bindings in = random_inputs(g, 3);
  agree(g, in);
  Executable exe = tj::compile(g, {});
  if (!exe.source().empty() && exe.source().find("tj_vfn") != std::string::npos) {  // the C++ backend's source
    EXPECT_EQ(exe.source().find("tj_index(("), std::string::npos);
  }
  idx[7] = -3;  // inside, counted from the end: checked and wrapped
  agree(graph(idx), in);
  idx[9] = 40;
  both_throw(graph(idx), in);
}

// Indices computed from constants (aten's bilinear upsampling: row * width
// + column, from two constants broadcast against each other) have a range
// known at compile time: inside the axis, read unchecked. Where the range
// reaches past the axis (a column too many), or past the dtype (an i32
// product that wraps), the check stays, and a bad index still fails.
TEST_F(EdgeSemantics, ComputedIndicesInsideTheAxisAreReadUnchecked) {
  auto graph = [](DType t, double row_scale, double last_col) {
    Graph g("flat_taps");
    ValueId x = g.add_input("x", {DType::f32, {2, 48}});
    ValueId rows = g.add_const({t, {4, 1}}, std::vector<double>{0, 1, 1, 5});
    ValueId cols = g.add_const({t, {6}}, std::vector<double>{0, 3, 2, 7, 1, last_col});
    ValueId scale = g.add_const({t, {}}, std::vector<double>{row_scale});
    ValueId idx = g.add(Op::add, {g.add(Op::mul, {rows, scale}), cols});  // [4, 6]
    g.set_outputs({g.add(Op::gather, {x, idx}, {{"axis", int64_t{1}}})});
    return g;
  };
  const bool cpu_source = [] {
    Graph g("probe");
    g.set_outputs({g.add(Op::exp, {g.add_input("x", {DType::f32, {4}})})});
    return tj::compile(g, {}).source().find("tj_vfn") != std::string::npos;
  }();
  Graph ok = graph(DType::i64, 8, 7);  // at most 5*8 + 7 = 47
  Bindings in = random_inputs(ok, 5);
  agree(ok, in);
  if (cpu_source) {
    EXPECT_EQ(tj::compile(ok, {}).source().find("tj_index(("), std::string::npos);
  }
  Graph past = graph(DType::i64, 8, 8);  // 48 at the last row: checked, and out of range
  if (cpu_source) {
    EXPECT_NE(tj::compile(past, {}).source().find("tj_index(("), std::string::npos);
  }
  both_throw(past, in);
  // i32: 5 * 2^30 wraps to 2^30 (past 48 either way): the range says nothing, the check stays.
  Graph wraps = graph(DType::i32, 1073741824.0, 7);
  if (cpu_source) {
    EXPECT_NE(tj::compile(wraps, {}).source().find("tj_index(("), std::string::npos);
  }
  both_throw(wraps, in);
}

// Reductions over any axes give the interpreter's bits: per output, its
// elements in row-major order of the reduced axes, whether the kernel goes
// one output at a time (few elements each, or the innermost axis reduced;
// the outputs split over the pool when large) or once over the input.
TEST_F(EdgeSemantics, ReductionsOverAnyAxesMatchTheInterpreterBitForBit) {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{3, 5, 7, 4}, {1}},    {{3, 5, 7, 4}, {0, 2}}, {{3, 5, 7, 4}, {3}}, {{3, 5, 7, 4}, {1, 3}},
      {{2, 64, 32, 32}, {0}}, {{2, 3, 64, 40}, {1}},  {{200, 300}, {0}},   {{16, 9, 300}, {0, 2}}};
  // On a device (its own reduction kernel), the small cases: each compile there takes a while.
  const size_t n = testing_on_cpu() ? cases.size() : 4;
  for (size_t c = 0; c < n; ++c)
    for (Op op : {Op::sum, Op::mean, Op::amax, Op::prod})
      for (DType t : {DType::f32, DType::i32}) {
        if (t == DType::i32 && op == Op::mean) continue;
        const auto& [shape, axes] = cases[c];
        SCOPED_TRACE(std::string(op_def(op).name) + " " + std::string(dtype_name(t)) + ", case " + std::to_string(c));
        Graph g("reduce");
        ValueId x = g.add_input("x", {t, shape});
        g.set_outputs({g.add(op, {x}, {{"axes", axes}})});
        agree(g, random_inputs(g, 9));
      }
}

// A gather of a value computed in the same loop nest read the value at its
// own index, not the gathered one, and the memory plan let a gather write
// over its own table (silently wrong answers, fuzz_compiled): a gather's
// table is now complete before the gather runs, and never its output buffer.
TEST_F(EdgeSemantics, GatherOfAValueComputedBeside) {
  Graph g("gather_fused");
  ValueId x = g.add_input("x", {DType::f32, {4, 3, 3}});
  ValueId idx = g.add_input("i", {DType::i32, {3}});
  ValueId ge = g.add(Op::ge, {x, g.add_const({DType::f32, {}}, std::vector<double>{0})});
  g.set_outputs({g.add(Op::gather, {ge, idx}, {{"axis", int64_t{1}}}), g.add(Op::gather, {g.add(Op::neg, {x}), idx}, {{"axis", int64_t{2}}})});
  std::vector<double> xs(36);
  for (size_t k = 0; k < xs.size(); ++k) xs[k] = static_cast<double>(k % 7) - 3;
  for (std::vector<double> i : {std::vector<double>{2, 1, 1}, {2, 1, 0}, {1, 2, 0}})
    agree(g, {{"x", NDArray::from(DType::f32, {4, 3, 3}, xs)}, {"i", NDArray::from(DType::i32, {3}, i)}});
}

// Every index of a gather is checked, also where no output reads the
// elements it selects (an empty slice of a free gather): as interpreted.
TEST_F(EdgeSemantics, IndicesNoOutputReadsAreChecked) {
  Graph g("gather_unread");
  ValueId x = g.add_input("x", {DType::f32, {0, 1}});
  ValueId idx = g.add_const({DType::i64, {2}}, std::vector<double>{0, 0});
  ValueId sq = g.add(Op::squeeze, {g.add(Op::gather, {x, idx})}, {{"axes", std::vector<int64_t>{1}}});
  g.set_outputs({g.add(Op::slice, {sq}, {{"axis", int64_t{0}}, {"start", Dim(0)}, {"end", Dim(0)}})});
  Bindings in{{"x", NDArray(DType::f32, {0, 1})}};
  both_throw(g, in);
}

// A gather whose indices are a gather, reduced in a rowwise kernel
// (fuzz_compiled finding: "gather is not elementwise").
TEST_F(EdgeSemantics, GatherOfGatherInAReduction) {
  Graph g("gathers");
  ValueId x = g.add_input("x", {DType::i32, {2}});
  ValueId once = g.add(Op::gather, {x, x});
  ValueId twice = g.add(Op::gather, {x, once});
  ValueId m = g.add(Op::amax, {twice}, {{"axes", std::vector<int64_t>{0}}});
  g.set_outputs({g.add(Op::lt, {m, m}), m});
  auto got = agree(g, {{"x", NDArray::from(DType::i32, {2}, {-1, 1})}});
  EXPECT_EQ(got[1].data<int32_t>()[0], 1);
}

// Empty values compile and run: a gather into an empty result reads no
// index (so none is out of range), an empty constant has no value to read,
// and two of them are one to cse (fuzz_compiled findings).
TEST_F(EdgeSemantics, EmptyValues) {
  Graph g("empty");
  ValueId x = g.add_input("x", {DType::f64, {3, 0}});
  ValueId s = g.add(Op::slice, {x}, {{"axis", int64_t{0}}, {"start", Dim(2)}, {"end", Dim(2)}, {"step", int64_t{2}}});
  ValueId i = g.add_const({DType::i32, {}}, std::vector<double>{0});
  ValueId e = g.add_const({DType::f64, {0}}, std::vector<double>{});
  ValueId e2 = g.add_const({DType::f64, {0}}, std::vector<double>{});  // cse compares empty data (UBSan: memcmp of null)
  g.set_outputs({g.add(Op::gather, {s, i}), e, g.add(Op::add, {e, e2})});
  auto got = agree(g, {{"x", NDArray(DType::f64, {3, 0})}});
  for (const NDArray& a : got) EXPECT_EQ(a.numel(), 0);
}


// Every pointwise op row, compiled against the interpreter over every pair
// (or triple) of edge values of every dtype its inference takes, one program
// per dtype: integers and bools exactly, floats to a few ulps (generated
// code's exp is its own, within 2 ulp, and flushes results below 2^-126 to
// zero). Integer divisors skip 0, an error in both (tested on its own).
TEST_F(EdgeSemantics, EveryPointwiseRowAgreesWithTheInterpreter) {
  int checked = 0;
  for (DType t : kTypes) {
    NDArray e = edges(t);
    int64_t n = e.shape()[0];
    NDArray nonzero(t, {n - 1});  // edges(t)[0] is 0
    std::memcpy(nonzero.raw(), static_cast<const char*>(e.raw()) + dtype_size(t), nonzero.nbytes());
    Graph g(std::string("pointwise_") + std::string(dtype_name(t)));
    Bindings in{{"e", e}, {"nz", nonzero}};
    ValueId ve = g.add_input("e", {t, {n}}), vnz = g.add_input("nz", {t, {n - 1}});
    std::vector<ValueId> outs;
    std::vector<const OpDef*> ops;
    for (int op_index = 0; op_index < static_cast<int>(Op::kNumOps); ++op_index) {
      const OpDef& def = op_def(static_cast<Op>(op_index));
      if (def.fuse != Fuse::pointwise || def.op == Op::cast || def.op == Op::where) continue;  // casts: above; where: interpreter tests
      int arity = def.min_inputs;
      std::vector<ValueId> operands;
      for (int i = 0; i < arity; ++i) {
        ValueId a = i > 0 && is_int(t) ? vnz : ve;
        Shape s(static_cast<size_t>(arity), Dim(1));
        s[static_cast<size_t>(i)] = g.type(a).shape[0];
        operands.push_back(g.add(Op::reshape, {a}, {{"shape", s}}));
      }
      try {
        outs.push_back(g.add(def.op, operands));
        ops.push_back(&def);
      } catch (const ShapeError&) {
        // the op does not take this dtype
      }
    }
    g.set_outputs(outs);
    SCOPED_TRACE(std::string(dtype_name(t)));
    auto want = interpret(g, in, {t == DType::f64 ? DType::f64 : DType::f32});
    CompileOptions co;
    co.passes = {"dce"};  // each row's own C expression, composites not decomposed
    Executable exe = tj::compile(g, {}, co);
    Bindings copy = in;
    auto got = exe.run(copy);
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < got.size(); ++o) {
      SCOPED_TRACE(ops[o]->name);
      ASSERT_EQ(got[o].numel(), want[o].numel());
      DType rt = g.type(g.outputs()[o]).dtype;
      double rel = rt == DType::f64 ? 4e-16 : 5e-7, abs = rt == DType::f64 ? 0 : 1e-37;
      int bad = 0;
      for (int64_t k = 0; k < got[o].numel() && bad < 5; ++k) {
        double a = got[o].get(k), b = want[o].get(k);
        bool same = is_float(rt) ? (std::isnan(a) && std::isnan(b)) || a == b || std::abs(a - b) <= rel * std::max(std::abs(a), std::abs(b)) + abs
                                 : bits(got[o], k, rt) == bits(want[o], k, rt);
        bad += !same;
        EXPECT_TRUE(same) << "element " << k << ": compiled " << a << ", interpreted " << b;
      }
      ++checked;
    }
  }
  std::printf("[ pointwise ] %d (op, dtype) pairs compiled against the interpreter\n", checked);
  EXPECT_GE(checked, 60);
}

TEST_F(EdgeSemantics, IntegerModuloByZeroIsAnErrorInBoth) {
  for (bool fmod : {false, true}) {
    Graph g("mod0");
    ValueId a = g.add_input("a", {DType::i32, {2}});
    ValueId b = g.add_input("b", {DType::i32, {2}});
    g.set_outputs({g.add(Op::mod, {a, b}, {{"fmod", fmod}})});
    both_throw(g, {{"a", NDArray::from(DType::i32, {2}, {5, -3})}, {"b", NDArray::from(DType::i32, {2}, {2, 0})}});
  }
  // Index math that divides by zero and whose result nobody reads (an expand
  // to no elements): still an error compiled, as interpreted (fuzz_compiled).
  for (const char* op : {"mod", "div"}) {
    std::string text = std::string("graph g\n%0 = iota {n=1, dtype=i32} : i32[1]\n%1 = ") + op +
                       "(%0, %0) : i32[1]\n%2 = expand(%1) {shape=[0]} : i32[0]\n%3 = neg(%2) : i32[0]\nreturn %3\n";
    SCOPED_TRACE(text);
    both_throw(parse_graph(text), {});
  }
}

// The float8 and float4 formats: every bit pattern converts to a value and
// back to itself, the ONNX Cast tables hold (saturating and not), and the
// interpreter and generated code round every edge value alike. The 4- and
// 2-bit integers wrap, and a float out of their range converts to 0.
TEST_F(EdgeSemantics, SmallFloatsAndSubByteIntegers) {
  const DType minis[] = {DType::f8e4m3fn, DType::f8e4m3fnuz, DType::f8e5m2, DType::f8e5m2fnuz, DType::f8e8m0, DType::f4e2m1};
  for (DType t : minis) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const int n = t == DType::f4e2m1 ? 16 : 256;
    NDArray a(t, {n}), b(t, {n});
    for (int i = 0; i < n; ++i) a.data<uint8_t>()[i] = static_cast<uint8_t>(i);
    int nans = 0;
    for (int i = 0; i < n; ++i) {
      double v = a.get(i);
      nans += std::isnan(v);
      b.set(i, v);
      if (!std::isnan(v)) {
        EXPECT_EQ(b.data<uint8_t>()[i], i) << v;
        EXPECT_EQ(round_to_dtype(v, t, false), v);
      }
    }
    const int want_nans = t == DType::f8e4m3fn ? 2 : t == DType::f8e5m2 ? 6 : t == DType::f4e2m1 ? 0 : 1;
    EXPECT_EQ(nans, want_nans);
  }
  EXPECT_EQ(round_to_dtype(1000, DType::f8e4m3fn), 448);
  EXPECT_TRUE(std::isnan(round_to_dtype(1000, DType::f8e4m3fn, false)));
  EXPECT_EQ(round_to_dtype(463, DType::f8e4m3fn, false), 448);  // below 448's half-way point
  EXPECT_EQ(round_to_dtype(INFINITY, DType::f8e5m2), 57344);
  EXPECT_EQ(round_to_dtype(-1e6, DType::f8e5m2, false), -INFINITY);
  EXPECT_TRUE(std::isnan(round_to_dtype(INFINITY, DType::f8e5m2fnuz, false)));
  EXPECT_FALSE(std::signbit(round_to_dtype(-0.0, DType::f8e4m3fnuz)));  // no -0
  EXPECT_TRUE(std::signbit(round_to_dtype(-0.0, DType::f8e4m3fn)));
  EXPECT_EQ(round_to_dtype(0x1p-10, DType::f8e4m3fn), 0);  // half the smallest subnormal: to even
  EXPECT_EQ(round_to_dtype(3 * 0x1p-10, DType::f8e4m3fn), 0x1p-8);
  EXPECT_EQ(round_to_dtype(NAN, DType::f4e2m1), 6);  // float4 has no NaN
  EXPECT_EQ(round_to_dtype(0.75, DType::f4e2m1), 1);
  EXPECT_EQ(round_to_dtype(-9, DType::f4e2m1), -6);
  EXPECT_EQ(round_to_dtype(0.124, DType::f8e8m0), 0.125);  // rounds up
  EXPECT_EQ(round_to_dtype(0, DType::f8e8m0), 0x1p-127);
  EXPECT_EQ(round_to_dtype(-9, DType::i4), 0);
  EXPECT_EQ(round_to_dtype(-8.5, DType::i4), -8);
  EXPECT_EQ(round_to_dtype(2, DType::i2), 0);
  EXPECT_EQ(wrap_to(9, DType::i4), -7);
  EXPECT_EQ(wrap_to(-1, DType::u2), 3);

  // Interpreted and compiled: casts to each format and back, saturating and not.
  std::vector<double> f = {0.0, -0.0, 0.3, -0.47, 1.05, 2.5, 3.5, 17.0, 239.0, 241.0, 447.0, 463.0, 465.0, 1000.0, -1e6, 57344.0, 61440.0,
                           1e-7, 0x1p-10, 3 * 0x1p-10, NAN, INFINITY, -INFINITY, 5.9, 6.1, -9.0, 8.0, 7.9};
  Graph g("small");
  ValueId x = g.add_input("x", {DType::f32, {static_cast<int64_t>(f.size())}});
  ValueId d = g.add_input("d", {DType::f64, {static_cast<int64_t>(f.size())}});
  std::vector<ValueId> outs;
  for (DType t : minis)
    for (bool sat : {true, false})
      for (ValueId from : {x, d}) outs.push_back(g.add(Op::cast, {g.add(Op::cast, {from}, {{"to", t}, {"saturate", sat}})}, {{"to", DType::f32}}));
  for (DType t : {DType::i4, DType::u4, DType::i2, DType::u2}) {
    ValueId c = g.add(Op::cast, {x}, {{"to", t}});
    outs.push_back(c);
    outs.push_back(g.add(Op::add, {c, g.add(Op::cast, {d}, {{"to", t}})}));  // wraps
  }
  ValueId e = g.add(Op::cast, {x}, {{"to", DType::f8e4m3fn}});
  outs.push_back(g.add(Op::cast, {g.add(Op::mul, {e, e})}, {{"to", DType::f32}}));  // each op's result rounded, saturating
  g.set_outputs(outs);
  NDArray xs = NDArray::from(DType::f32, {static_cast<int64_t>(f.size())}, f), ds = NDArray::from(DType::f64, {static_cast<int64_t>(f.size())}, f);
  if (!testing_on_cpu()) {  // float8, float4 and sub-byte integers are not generated for GPUs: a clear error
    EXPECT_THROW(tj::compile(g, {}), Unsupported);
    return;
  }
  auto got = agree(g, {{"x", xs}, {"d", ds}});
  ASSERT_EQ(got.size(), outs.size());
  EXPECT_EQ(got[0].get(13), 448);        // e4m3fn, saturating: 1000
  EXPECT_TRUE(std::isnan(got[2].get(13)));  // not saturating
  EXPECT_EQ(got[24].data<int8_t>()[25], 0);  // i4 of -9
  EXPECT_EQ(got[24].data<int8_t>()[26], 0);  // i4 of 8
  EXPECT_EQ(got[24].data<int8_t>()[27], 7);  // i4 of 7.9
  EXPECT_EQ(got.back().get(13), 448);  // 448 * 448 saturates
}

}  // namespace
}  // namespace tj
