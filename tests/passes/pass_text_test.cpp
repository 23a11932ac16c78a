// Text-in/text-out pass tests: every case in tests/data/passes/*.tj is a graph
// with directives in comments:
//   # PASSES: cse,dce      the passes to run, in order, or `default` (required)
//   # FREEZE               freeze params with the seeded values first
//   # EXACT                the result must be bit-identical (f64 interpreter)
//   # OPS: N               op nodes (not inputs, params, constants) after
//   # SET: pos=3           a scalar input's value for the differential check
//   # SYM: T=3             a size symbol's value for the differential check
//   # WEIGHTS: bf16         quantize_weights' format (PassOptions::weights)
//   # TOL: 1e-2             the largest relative difference allowed, for
//                           passes that change values (a weight format)
//   # CHECK / CHECK-NEXT / CHECK-NOT: patterns on the printed result
// Cases are separated by a line `# -----`. Every case is also checked
// against the interpreter: in f64 (max relative difference <= 1e-13), or in
// f32 for graphs with f32 values (<= 1e-6).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/text.h"
#include "passes/passes.h"
#include "passes/pipeline.h"
#include "reference/random_inputs.h"
#include "support/filecheck.h"

namespace tj {
namespace {

std::vector<std::string> split_cases(const std::string& text) {
  std::vector<std::string> cases(1);
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line == "# -----") cases.emplace_back();
    else cases.back() += line + "\n";
  }
  return cases;
}

std::string directive(const std::string& text, const std::string& name) {
  std::string key = "# " + name;
  size_t at = text.find("\n" + key);
  if (at == std::string::npos && text.rfind(key, 0) != 0) return {};
  at = at == std::string::npos ? 0 : at + 1;
  size_t e = text.find('\n', at);
  std::string rest = text.substr(at + key.size(), e - at - key.size());
  if (!rest.empty() && rest[0] == ':') rest = rest.substr(1);
  size_t b = rest.find_first_not_of(' ');
  return b == std::string::npos ? " " : rest.substr(b);  // " " marks a flag
}

void run_case(const std::string& text) {
  std::string passes = directive(text, "PASSES");
  ASSERT_FALSE(passes.empty()) << "case without '# PASSES:'";
  Graph g = parse_graph(text);
  RandomInputOptions ro;
  ro.seed = 1;
  if (std::string set = directive(text, "SET"); !set.empty()) {
    auto eq = set.find('=');
    ro.fixed[set.substr(0, eq)] = std::stod(set.substr(eq + 1));
  }
  if (std::string sym = directive(text, "SYM"); !sym.empty()) {
    auto eq = sym.find('=');
    ro.sizes[sym.substr(0, eq)] = std::stoll(sym.substr(eq + 1));
  }
  Bindings inputs = random_inputs(g, ro);
  PipelineOptions o;
  o.differential = true;
  // Graphs with f32 values are checked in f32: constants fold in their dtype.
  bool any_f32 = false;
  for (const Node& n : g.nodes()) any_f32 |= n.type.dtype == DType::f32;
  o.differential_dtype = any_f32 ? DType::f32 : DType::f64;
  o.inputs = &inputs;
  if (!directive(text, "FREEZE").empty()) o.pass.freeze_values = &inputs;
  if (std::string w = directive(text, "WEIGHTS"); !w.empty()) o.pass.weights = *parse_dtype(w);
  const std::string tol = directive(text, "TOL");
  std::vector<std::string> list;
  std::stringstream ss(passes);
  for (std::string p; std::getline(ss, p, ',');) list.push_back(p);
  if (passes == "default") list = default_pipeline(o.pass.freeze_values != nullptr);
  auto records = run_pipeline(g, list, o);
  std::string out = print_graph(g);
  SCOPED_TRACE("result:\n" + out);
  EXPECT_LE(records.back().max_rel_diff, !tol.empty() ? std::stod(tol) : any_f32 ? 1e-6 : 1e-13);
  if (!directive(text, "EXACT").empty()) {
    EXPECT_TRUE(records.back().bit_identical);
  }
  if (std::string ops = directive(text, "OPS"); !ops.empty()) {
    EXPECT_EQ(count_nodes(g).total_ops, std::stoll(ops));
  }
  EXPECT_EQ(testing::filecheck(out, testing::parse_directives(text)), "");
  // The result is valid text too.
  EXPECT_EQ(print_graph(parse_graph(out)), out);
}

TEST(PassText, Corpus) {
  int cases = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(TJ_TEST_DATA) / "passes")) {
    std::ifstream f(entry.path());
    std::stringstream ss;
    ss << f.rdbuf();
    auto all = split_cases(ss.str());
    for (size_t i = 0; i < all.size(); ++i) {
      SCOPED_TRACE(entry.path().filename().string() + " case " + std::to_string(i + 1));
      run_case(all[i]);
      ++cases;
    }
  }
  EXPECT_GE(cases, 20);
}

// An i64 constant of INT64_MAX (a constant made from 1e19 saturates to it;
// IR text cannot spell it) folds exactly: read through a double it is 2^63,
// which no int64 holds (fuzz_compiled under UBSan; the corpus keeps the
// input as fuzz/corpus/fuzz_compiled/int64-max-fold.bin).
TEST(PassText, IntegerConstantsFoldExactly) {
  Graph g("int64_max");
  ValueId x = g.add_input("x", Type{DType::f64, {}});
  ValueId big = g.add_const(Type{DType::i64, {}}, std::vector<double>{1e19});
  ValueId as_f64 = g.add(Op::cast, {big}, {{"to", DType::f64}});
  g.set_outputs({g.add(Op::add, {x, as_f64})});
  Bindings in{{"x", NDArray::scalar(DType::f64, 0.5)}};
  auto want = interpret(g, in, {DType::f64});
  run_pipeline(g, {"constant_fold", "dce"}, PipelineOptions{});
  auto got = interpret(g, in, {DType::f64});
  EXPECT_EQ(got[0].get(0), want[0].get(0));
  EXPECT_EQ(got[0].get(0), 0x1p63 + 0.5);
}


// trim_conv_taps keeps a dead tap whose weight is not finite: the padding's
// +0 times inf is NaN, which the reference adds into every output (IR text
// cannot spell a constant with an inf among other values, hence here).
TEST(PassText, TrimConvTapsKeepsTapsWithNonFiniteWeights) {
  for (double bad : {HUGE_VAL, std::nan(""), 2.0}) {
    Graph g("atrous");
    ValueId x = g.add_input("x", Type{DType::f64, {Dim(1), Dim(1), Dim(3)}});
    ValueId w = g.add_const(Type{DType::f64, {Dim(1), Dim(1), Dim(3)}}, std::vector<double>{bad, 0.5, -1.5});
    g.set_outputs({g.add(Op::conv, {x, w}, {{"dilation", std::vector<int64_t>{4}}, {"pad_begin", std::vector<int64_t>{4}}, {"pad_end", std::vector<int64_t>{4}}})});
    NDArray xs(DType::f64, {1, 1, 3});
    for (int64_t i = 0; i < 3; ++i) xs.set(i, 1.0 + static_cast<double>(i));
    Bindings in{{"x", xs}};
    auto want = interpret(g, in, {DType::f64});
    EXPECT_EQ(trim_conv_taps(g, PassOptions{}), std::isfinite(bad));
    auto got = interpret(g, in, {DType::f64});
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(std::bit_cast<uint64_t>(got[0].get(i)), std::bit_cast<uint64_t>(want[0].get(i))) << bad << " " << i;
    EXPECT_EQ(std::isnan(want[0].get(0)), !std::isfinite(bad));
  }
}

// The test's FileCheck: CHECK-SAME looks at the line of the match before it.
TEST(PassText, FileCheckSame) {
  auto run = [](const std::string& out, const std::string& checks) { return testing::filecheck(out, testing::parse_directives(checks)); };
  EXPECT_EQ(run("a b\nc d\n", "# CHECK: a\n# CHECK-SAME: b\n# CHECK-NEXT: c\n# CHECK-SAME: d\n"), "");
  EXPECT_NE(run("a b\nc d\n", "# CHECK: a\n# CHECK-SAME: d\n"), "");
  EXPECT_NE(run("a b\n", "# CHECK-SAME: a\n"), "");
}

}  // namespace
}  // namespace tj
