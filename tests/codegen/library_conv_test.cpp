// The matrix library's convolution (oneDNN, runtime/library_conv.h) as the
// C++ emitter runs it for a channels-last conv: by rule for a 1x1 conv that
// expands few channels, and as the tuning candidate of every conv it takes,
// each against the interpreter in f64 over the geometries a part's rows
// meet (padding at an image's top and bottom only, strides, dilation,
// asymmetric pads, 1-d, two images, depthwise, groups, the NCHW image read
// at its strides) with the epilogues the library applies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "codegen/cpp/emit.h"
#include "codegen/cpp/kernels/conv_common.h"
#include "codegen/on_device.h"
#include "compiler/compile.h"
#include "passes/pipeline.h"
#include "reference/random_inputs.h"
#include "tune/autotune.h"

namespace tj {
namespace {

struct Case {
  std::string name;
  std::vector<int64_t> x, w;  // x [N, d.., C] (channels first with `nchw`), w [M, C/groups, k..]
  std::vector<int64_t> stride = {}, dilation = {}, pad_begin = {}, pad_end = {};
  int64_t groups = 1;
  bool bias = false;
  std::string epilogue = "";  // "relu", "relu6", "residual relu" (+ r, then ReLU), "shortcut first" (r +)
  bool nchw = false;          // x channels first, permuted to channels last
};

Shape shape_of(const std::vector<int64_t>& v) {
  Shape s;
  for (int64_t d : v) s.push_back(Dim(d));
  return s;
}

Graph build(const Case& c) {
  Graph g(c.name);
  ValueId x = g.add_input("x", {DType::f32, shape_of(c.x)});
  if (c.nchw) {
    std::vector<int64_t> perm{0};
    for (size_t i = 2; i < c.x.size(); ++i) perm.push_back(static_cast<int64_t>(i));
    perm.push_back(1);
    x = g.add(Op::permute, {x}, {{"perm", perm}});
  }
  std::vector<ValueId> ops{x, g.add_param("w", {DType::f32, shape_of(c.w)})};
  if (c.bias) ops.push_back(g.add_param("b", {DType::f32, {Dim(c.w[0])}}));
  ValueId y = g.add(Op::conv, ops, {{"stride", c.stride}, {"dilation", c.dilation}, {"pad_begin", c.pad_begin}, {"pad_end", c.pad_end},
                                    {"groups", c.groups}, {"channels_last", true}});
  if (c.epilogue == "residual relu") y = g.add(Op::add, {y, g.add_input("r", g.type(y))});
  if (c.epilogue == "shortcut first") y = g.add(Op::add, {g.add_input("r", g.type(y)), y});
  if (c.epilogue == "relu" || c.epilogue == "residual relu") y = g.add(Op::relu, {y});
  if (c.epilogue == "relu6")
    y = g.add(Op::clip, {y, g.add_const({DType::f32, {}}, std::vector<double>{0}), g.add_const({DType::f32, {}}, std::vector<double>{6})});
  g.set_outputs({y});
  return g;
}

class LibraryConv : public ::testing::Test {
 protected:
  void SetUp() override {
    TJ_SKIP_WITHOUT_TEST_DEVICE();
    dir_ = std::string(::testing::TempDir()) + "tj_library_conv_" + std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    setenv("TJ_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

// g compiled with `co` into *exe, its outputs against the interpreter's in f64.
double against_f64(const Graph& g, const CompileOptions& co, Executable* exe) {
  RandomInputOptions ro;
  ro.seed = 5;
  Bindings all = random_inputs(g, ro), in, params;
  for (const auto& [k, v] : all) (g.node(g.find(k)).op == Op::param ? params : in)[k] = v;
  *exe = tj::compile(g, params, co);
  return compare_outputs(exe->run(in), interpret(g, all, {DType::f64})).max_rel;
}

TEST_F(LibraryConv, EveryFormItTakesMatchesTheInterpreter) {
  const std::vector<Case> cases = {
      {"1x1 expanding, two images", {2, 6, 5, 16}, {96, 16, 1, 1}, {}, {}, {}, {}, 1, true, "relu6"},
      {"3x3 stride 2, 40 outputs", {2, 13, 12, 24}, {40, 24, 3, 3}, {2, 2}, {}, {1, 1}, {1, 1}, 1, false, "relu"},
      {"3x3 same, 70 outputs", {1, 9, 10, 8}, {70, 8, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 1, true, ""},
      {"dilated", {1, 16, 15, 4}, {6, 4, 3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, 1, false, ""},
      {"asymmetric pads, wide kernel", {1, 8, 20, 3}, {5, 3, 2, 5}, {1, 3}, {}, {0, 2}, {1, 0}, 1, true, "relu"},
      {"depthwise 3x3", {2, 13, 11, 24}, {24, 1, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 24, true, "relu6"},
      {"depthwise 5x5 stride 2", {1, 15, 14, 40}, {40, 1, 5, 5}, {2, 2}, {}, {2, 2}, {2, 2}, 40, false, ""},
      {"1d", {2, 30, 6}, {9, 6, 4}, {2}, {}, {1}, {2}, 1, true, "relu"},
      {"stem, the NCHW image at its strides", {1, 3, 23, 21}, {16, 3, 3, 3}, {2, 2}, {}, {1, 1}, {1, 1}, 1, true, "relu6", true},
      {"1x1, a residual then ReLU", {2, 14, 14, 32}, {64, 32, 1, 1}, {}, {}, {}, {}, 1, true, "residual relu"},
      {"3x3 stride 2, the shortcut first", {1, 12, 10, 16}, {24, 16, 3, 3}, {2, 2}, {}, {1, 1}, {1, 1}, 1, false, "shortcut first"},
      // Groups, their weights taps first (4 inputs and outputs each) and in
      // blocks of 16 and of 64 outputs (resnext's forms).
      {"grouped 3x3, 4 per group", {2, 10, 9, 32}, {32, 4, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 8, true, "relu"},
      {"grouped 3x3, 24 per group", {1, 9, 10, 48}, {48, 24, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 2, true, "relu"},
      {"grouped 3x3 stride 2, 12 per group", {1, 8, 9, 36}, {36, 12, 3, 3}, {2, 2}, {}, {1, 1}, {1, 1}, 3, false, ""},
      {"grouped 3x3 stride 2, 16 per group", {1, 13, 12, 64}, {64, 16, 3, 3}, {2, 2}, {}, {1, 1}, {1, 1}, 4, false, ""},
      {"grouped 1x1, 128 outputs per group", {1, 7, 7, 32}, {256, 16, 1, 1}, {}, {}, {}, {}, 2, true, "residual relu"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Graph g = build(c);
    // The tuning candidates, then the library's recorded as the winner.
    CompileOptions co;
    co.autotune = true;
    Executable exe = Executable::interpreted(g, {}, {});
    EXPECT_LE(against_f64(g, co, &exe), 1e-5);
    if (exe.device() != "cpu") return;  // the C++ emitter's
    EmittedProgram p = emit_cpp(exe.optimized(), exe.schedule(), {}, true);
    ASSERT_EQ(p.tunable.size(), 1u);
    const auto& t = p.tunable[0];
    const auto at = std::find(t.labels.begin(), t.labels.end(), "oneDNN");
    ASSERT_NE(at, t.labels.end());
    TuningResult r;
    r.winner = static_cast<int>(at - t.labels.begin());
    r.median_s.assign(t.labels.size(), 1e-6);
    r.win_share.assign(t.labels.size(), 1);
    record_choice(t.signature, t.labels, r);
    EXPECT_LE(against_f64(g, co, &exe), 1e-5);
    EXPECT_EQ(exe.stats().tuned_now, 0);
    EXPECT_NE(exe.source().find("conv_plan("), std::string::npos);
    // The residual added by the library (its desc's flag before the
    // activation's), the ReLU after it.
    if (c.epilogue == "residual relu" || c.epilogue == "shortcut first") {
      EXPECT_NE(exe.source().find(c.epilogue == "residual relu" ? ", 1, 1, (float)" : ", 1, 0, (float)"), std::string::npos) << exe.source();
    }
    // The NCHW image read where it lies (its strides by image, channel, row, column).
    if (c.nchw) {
      EXPECT_NE(exe.source().find("{1449, 483, 21, 1}"), std::string::npos);
    }
    // The rules: the library for the expanding 1x1 conv and groups of a
    // width that divides no vector (the generated form goes a channel at a
    // time there) only; without
    // AVX-512 also for stems (at most 4 input channels) and strided convs
    // with output rows of 14 or fewer, one group each, and with a residual
    // only for stride-1 1x1s of 14x14 positions and more.
    static const std::set<std::string> narrow = {"3x3 stride 2, 40 outputs", "dilated", "asymmetric pads, wide kernel",
                                                 "stem, the NCHW image at its strides", "1x1, a residual then ReLU"};
    EXPECT_LE(against_f64(g, {}, &exe), 1e-5);
    EXPECT_EQ(exe.source().find("conv_plan(") != std::string::npos,
              c.name == "1x1 expanding, two images" || c.name.find("12 per group") != std::string::npos ||
                  c.name.find("24 per group") != std::string::npos || (!cpp::conv_kernels::wide_vectors() && narrow.count(c.name)));
  }
}

// Where the library makes no plan (TJ_LIBRARY_CONV=off here; on another CPU,
// only its reference kernels), a library kernel runs the generated form it
// also holds: the rule's, and the tuner's candidate.
TEST_F(LibraryConv, WithoutAPlanTheGeneratedFormRuns) {
  const Case c{"1x1 expanding", {1, 6, 5, 16}, {96, 16, 1, 1}, {}, {}, {}, {}, 1, true, "relu6"};
  const Graph g = build(c);
  setenv("TJ_LIBRARY_CONV", "off", 1);
  Executable exe = Executable::interpreted(g, {}, {});
  EXPECT_LE(against_f64(g, {}, &exe), 1e-5);
  if (exe.device() == "cpu") {
    EXPECT_NE(exe.source().find("conv_plan("), std::string::npos);
    EXPECT_NE(exe.source().find("tj_conv_tile_cl<"), std::string::npos);
    CompileOptions co;
    co.autotune = true;
    against_f64(g, co, &exe);
    EmittedProgram p = emit_cpp(exe.optimized(), exe.schedule(), {}, true);
    ASSERT_EQ(p.tunable.size(), 1u);
    TuningResult r;
    r.winner = 0;  // the rule's: the library
    r.median_s.assign(p.tunable[0].labels.size(), 1e-6);
    r.win_share.assign(p.tunable[0].labels.size(), 1);
    record_choice(p.tunable[0].signature, p.tunable[0].labels, r);
    EXPECT_LE(against_f64(g, co, &exe), 1e-5);  // the rule's function, with its generated form
    // A 3x3 conv's library candidate, recorded as the winner: the same.
    const Graph g3 = build({"3x3", {1, 9, 10, 8}, {70, 8, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 1, true, ""});
    EXPECT_LE(against_f64(g3, co, &exe), 1e-5);
    p = emit_cpp(exe.optimized(), exe.schedule(), {}, true);
    ASSERT_EQ(p.tunable.size(), 1u);
    ASSERT_EQ(p.tunable[0].labels.at(1), "oneDNN");
    r.winner = 1;
    record_choice(p.tunable[0].signature, p.tunable[0].labels, r);
    EXPECT_LE(against_f64(g3, co, &exe), 1e-5);
    EXPECT_NE(exe.source().find("conv_plan("), std::string::npos);
  }
  unsetenv("TJ_LIBRARY_CONV");
}

}  // namespace
}  // namespace tj
