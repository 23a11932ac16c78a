// The conv op (ir/ops/conv.cpp): its kernels compiled against the
// interpreter over the geometries a convnet has (depthwise, 1x1, strided,
// dilated, grouped, asymmetric pads, one to three spatial dims) with
// epilogues (bias, activation, residual add, per-channel scale); its window
// form (lower_convs) against its reference kernel; shape errors; the text
// form.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <regex>
#include <set>
#include <string>

#include "codegen/cpp/build.h"
#include "codegen/on_device.h"
#include "compiler/compile.h"
#include "ir/layout.h"
#include "ir/text.h"
#include "passes/passes.h"
#include "passes/pipeline.h"
#include "reference/random_inputs.h"
#include "support/scratch.h"
#include "tensorjit/error.h"

namespace tj {
namespace {

class Conv : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::use_scratch_cache("conv");
  }
  // The generated forms wherever a rule would take the matrix library
  // (without AVX-512 the rules take most 1x1 convs): these tests read them.
  void SetUp() override {
    TJ_SKIP_WITHOUT_TEST_DEVICE();
    setenv("TJ_CONV_FORMS", "generated", 1);
  }
  void TearDown() override { unsetenv("TJ_CONV_FORMS"); }
};

struct Case {
  std::string name;
  std::vector<int64_t> x, w;  // [N, C, d..], [M, C/groups, k..]
  std::vector<int64_t> stride = {}, dilation = {}, pad_begin = {}, pad_end = {};
  int64_t groups = 1;
  bool bias = false;
  std::string epilogue = "";  // "relu", "residual" (relu(y + r)), "scale" (y * s + t per channel, then hardswish), "relu and sums" (both outputs)
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"3x3 same", {1, 8, 10, 9}, {16, 8, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 1, true, "relu"},
      {"3x3 stride 2", {2, 5, 11, 12}, {7, 5, 3, 3}, {2, 2}, {}, {1, 1}, {1, 1}, 1, false, "residual"},
      {"7x7 stride 2 stem", {1, 3, 23, 21}, {8, 3, 7, 7}, {2, 2}, {}, {3, 3}, {3, 3}, 1, true, "scale"},
      {"1x1", {2, 24, 7, 6}, {40, 24, 1, 1}, {}, {}, {}, {}, 1, true, "residual"},
      {"1x1 stride 2", {1, 16, 9, 9}, {32, 16, 1, 1}, {2, 2}, {}, {}, {}, 1, false, ""},
      {"depthwise 3x3", {2, 12, 13, 11}, {12, 1, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 12, true, "scale"},
      {"depthwise 5x5 stride 2", {1, 8, 15, 14}, {8, 1, 5, 5}, {2, 2}, {}, {2, 2}, {2, 2}, 8, false, "relu"},
      {"depthwise multiplier 2", {1, 4, 9, 9}, {8, 1, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 4, true, ""},
      {"grouped", {1, 8, 9, 10}, {12, 2, 3, 3}, {1, 1}, {}, {0, 1}, {2, 0}, 4, true, "relu"},
      {"dilated", {1, 4, 16, 15}, {6, 4, 3, 3}, {1, 1}, {2, 3}, {2, 3}, {2, 3}, 1, false, ""},
      {"atrous over a small map", {1, 16, 6, 5}, {32, 16, 3, 3}, {1, 1}, {4, 4}, {4, 4}, {4, 4}, 1, true, "relu"},
      {"atrous, rows and columns", {1, 16, 6, 14}, {32, 16, 3, 3}, {1, 1}, {4, 12}, {4, 12}, {4, 12}, 1, true, ""},
      {"asymmetric pads, wide kernel", {1, 3, 8, 20}, {5, 3, 2, 5}, {1, 3}, {}, {0, 2}, {1, 0}, 1, true, ""},
      {"1d", {2, 6, 30}, {9, 6, 4}, {2}, {}, {1}, {2}, 1, true, "relu"},
      {"1d depthwise", {1, 6, 17}, {6, 1, 3}, {1}, {}, {1}, {1}, 6, false, ""},
      {"3d", {1, 3, 5, 6, 7}, {4, 3, 2, 3, 3}, {1, 2, 1}, {}, {0, 1, 1}, {1, 1, 0}, 1, true, "relu"},
      {"rows of whole tiles and a tail", {1, 16, 14, 14}, {32, 16, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 1, true, ""},
      {"row blocks, 48 channels", {1, 8, 30, 26}, {48, 8, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 1, false, "relu"},
      {"stride 2, whole tiles", {1, 16, 28, 28}, {32, 16, 3, 3}, {2, 2}, {}, {1, 1}, {1, 1}, 1, true, "residual"},
      {"1x1 over positions", {1, 20, 9, 12}, {44, 20, 1, 1}, {}, {}, {}, {}, 1, true, "scale"},
      {"1x1 over positions, two images", {2, 16, 10, 10}, {24, 16, 1, 1}, {}, {}, {}, {}, 1, false, "residual"},
      {"grouped, wider", {1, 16, 14, 14}, {32, 8, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 2, true, ""},
      {"grouped, row blocks", {1, 8, 28, 30}, {16, 2, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 4, false, "relu"},
      {"many channels, few positions", {1, 128, 3, 3}, {256, 128, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 1, false, "relu"},
      {"1x1, positions in two parts", {1, 8, 20, 55}, {36, 8, 1, 1}, {}, {}, {}, {}, 1, true, "scale"},
      // Channels last, 7-wide rows and 64 output channels: 4-vector tiles;
      // weights past the cache: blocks of input channels, the last shorter.
      {"4-vector tiles, input channel blocks", {1, 120, 7, 7}, {64, 120, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 1, true, "residual"},
      {"1x1, 49 positions, 4-vector tiles", {1, 24, 7, 7}, {128, 24, 1, 1}, {}, {}, {}, {}, 1, false, "relu"},
      // 13-wide rows: the last tile overlaps its neighbour, so neither input
      // channel blocks (a block's sums would be added twice there) nor the
      // epilogue per tile.
      {"13-wide rows, weights past the cache", {1, 128, 13, 13}, {64, 128, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 1, true, "residual"},
      {"1x1, 50 positions in overlapping tiles", {1, 16, 5, 10}, {64, 16, 1, 1}, {}, {}, {}, {}, 1, true, "residual"},
      {"64 + 40 channels: 4- and 3-vector tiles", {1, 8, 9, 11}, {104, 8, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 1, true, "relu"},
      // 196 positions to 24 channels: one block of channels, so 8 parts of
      // positions (24 each, tiles of 12), each with its epilogue per tile.
      {"1x1, few channels, parts of positions", {1, 40, 14, 14}, {24, 40, 1, 1}, {}, {}, {}, {}, 1, true, "residual"},
      {"1x1, the sums an output too", {1, 16, 5, 10}, {64, 16, 1, 1}, {}, {}, {}, {}, 1, true, "relu and sums"},
      {"3x3, the sums an output too", {1, 8, 9, 11}, {104, 8, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 1, true, "relu and sums"},
      {"depthwise, the sums an output too", {1, 20, 9, 10}, {20, 1, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 20, true, "relu and sums"},
      {"depthwise, 84 channels", {1, 84, 9, 10}, {84, 1, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 84, true, "relu"},
      {"depthwise 5x5 stride 2, 36 channels", {2, 36, 11, 12}, {36, 1, 5, 5}, {2, 2}, {}, {2, 2}, {2, 2}, 36, false, "residual"},
      // Border columns in runs of their own, taps outside left out: two
      // each side of a 7-wide row (mnasnet's 5x5 at 7x7), 40 channels (a
      // vector moved back).
      {"depthwise 5x5 at 7x7, 40 channels", {1, 40, 7, 7}, {40, 1, 5, 5}, {1, 1}, {}, {2, 2}, {2, 2}, 40, true, "relu"},
      // Depthwise runs (tj_cl_run): taps two columns apart; rows too
      // narrow for a run (every window crosses a border); sums of a run past
      // the stack tile's 64 KB (8 positions by 3000 channels), the epilogue
      // then from y.
      {"depthwise 3x3 dilated, 24 channels", {1, 24, 12, 17}, {24, 1, 3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, 24, true, "relu"},
      {"depthwise, rows of 2", {1, 32, 5, 2}, {32, 1, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 32, true, "relu"},
      {"depthwise, 3000 channels", {1, 3000, 4, 18}, {3000, 1, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 3000, true, "scale"},
      // No left pad, stride 2, a column whose window ends in the right pad
      // (TensorFlow's SAME): no run; every tap past the image skipped.
      {"depthwise stride 2, pads at the end only", {1, 16, 2, 2}, {16, 1, 3, 3}, {2, 2}, {}, {0, 0}, {1, 1}, 16, true, "relu"},
      // Channels last, 3x3, stride 1, input channels a multiple of 16, at
      // least 49 output positions: Winograd F(2x2, 3x3) (odd sizes: tiles
      // past the output's edge; 40 and 104 channels: a partial block).
      {"winograd: 14x14, 64 channels", {1, 32, 14, 14}, {64, 32, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 1, true, "relu"},
      {"winograd: odd sizes, 40 channels", {1, 16, 13, 15}, {40, 16, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 1, false, "residual"},
      {"winograd: no pads, two images, sums too", {2, 16, 16, 18}, {104, 16, 3, 3}, {1, 1}, {}, {}, {}, 1, true, "relu and sums"},
      {"winograd: asymmetric pads, 128 channels", {1, 48, 12, 14}, {128, 48, 3, 3}, {1, 1}, {}, {0, 1}, {2, 0}, 1, true, "scale"},
      // At least 28x28 output positions: F(4x4, 3x3) (29x31: tiles past
      // the output's edge, 1 and 3 of their rows and columns inside).
      {"winograd 4x4: 28x28, 64 channels", {1, 32, 28, 28}, {64, 32, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 1, true, "relu"},
      {"winograd 4x4: odd sizes, 40 channels", {1, 16, 29, 31}, {40, 16, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 1, false, "residual"},
      {"winograd 4x4: no pads, two images, sums too", {2, 16, 30, 32}, {104, 16, 3, 3}, {1, 1}, {}, {}, {}, 1, true, "relu and sums"},
      // Groups of as many outputs as inputs, 2, 4 or 8 (regnet's 8,
      // resnext's 4 and 8): channels last, a shuffle per input of a group;
      // 104 channels: a last vector moved back; 216: 14 vectors, 8 and 6 at
      // a time, the last moved back.
      {"groups of 4", {1, 32, 9, 10}, {32, 4, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 8, true, "relu"},
      {"groups of 8, stride 2, 104 channels", {1, 104, 11, 12}, {104, 8, 3, 3}, {2, 2}, {}, {1, 1}, {1, 1}, 13, false, "residual"},
      {"groups of 8, 216 channels", {1, 216, 7, 9}, {216, 8, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 27, true, "relu"},
      {"groups of 2, two images, sums too", {2, 48, 7, 8}, {48, 2, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 24, true, "relu and sums"},
      // Widths that divide no vector (regnet_y_1_6gf's 24): the generated
      // form one channel at a time (the library takes them by rule).
      {"groups of 24", {1, 48, 7, 9}, {48, 24, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 2, true, "relu"},
      {"groups of 24, a scale and hardswish", {1, 48, 6, 5}, {48, 24, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 2, false, "scale"},
      {"groups of 12, stride 2", {1, 36, 9, 8}, {36, 12, 3, 3}, {2, 2}, {}, {1, 1}, {1, 1}, 3, false, "residual"},
      // Groups of 16 outputs and more: the direct form's tiles per block of
      // min(outputs per group, 64), each reading its group's inputs
      // (resnext's 16 and 32; 128 outputs per group: two blocks a group;
      // 16 outputs of 8 inputs).
      {"groups of 16, stride 2", {1, 64, 13, 14}, {64, 16, 3, 3}, {2, 2}, {}, {1, 1}, {1, 1}, 4, true, "relu"},
      {"groups of 32, two images, sums too", {2, 96, 7, 9}, {96, 32, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 3, false, "relu and sums"},
      {"groups of 128 outputs", {1, 32, 6, 7}, {256, 16, 3, 3}, {1, 1}, {}, {1, 1}, {1, 1}, 2, true, "residual"},
      {"groups of 16 outputs of 8 inputs, 1x1", {1, 24, 5, 9}, {48, 8, 1, 1}, {}, {}, {}, {}, 3, true, "scale"},
      // Few channels times taps, rows of at least a vector: vectors over positions.
      {"row form: stem, stride 2, a tail tile", {1, 3, 40, 70}, {20, 3, 3, 3}, {2, 2}, {}, {1, 1}, {1, 1}, 1, true, "scale"},
      {"row form: dilated, two channel parts", {1, 2, 5, 101}, {40, 2, 3, 5}, {1, 1}, {1, 2}, {1, 2}, {1, 2}, 1, false, "residual"},
      {"row form: 1d", {2, 4, 64}, {12, 4, 3}, {1}, {}, {1}, {1}, 1, true, "relu"},
  };
  return c;
}

// Groups the channels-last grouped kernel computes (grouped_channels_last).
Shape weight_shape(const Case& c) {
  Shape w;
  for (int64_t d : c.w) w.push_back(Dim(d));
  return w;
}
bool grouped(const Case& c) { return grouped_channels_last(weight_shape(c), c.groups); }

// With last, channels last: x [N, d.., C], the output and the epilogue's
// operands [N, o.., M].
Graph build(const Case& c, DType dt, bool last = false) {
  Graph g(c.name);
  auto shape = [](const std::vector<int64_t>& v) {
    Shape s;
    for (int64_t d : v) s.push_back(Dim(d));
    return s;
  };
  const Shape first = shape(c.x);
  Shape xs = first;
  if (last) xs = {first[0]}, xs.insert(xs.end(), first.begin() + 2, first.end()), xs.push_back(first[1]);
  ValueId x = g.add_input("x", {dt, xs});
  ValueId w = g.add_param("w", {dt, shape(c.w)});
  std::vector<ValueId> ops{x, w};
  if (c.bias) ops.push_back(g.add_param("b", {dt, {Dim(c.w[0])}}));
  ValueId y = g.add(Op::conv, ops, {{"stride", c.stride}, {"dilation", c.dilation}, {"pad_begin", c.pad_begin}, {"pad_end", c.pad_end},
                                    {"groups", c.groups}, {"channels_last", last}});
  const Shape ys = g.type(y).shape;
  Shape per(ys.size() - 1, Dim(1));
  if (last) per.back() = ys.back();
  else per[0] = ys[1];
  if (c.epilogue == "relu") y = g.add(Op::relu, {y});
  if (c.epilogue == "residual") y = g.add(Op::relu, {g.add(Op::add, {y, g.add_input("r", {dt, ys})})});
  if (c.epilogue == "relu and sums") {  // the sums an output too: stored in y, not only in an L1 tile
    g.set_outputs({g.add(Op::relu, {y}), y});
    return g;
  }
  if (c.epilogue.rfind("relu6", 0) == 0 || c.epilogue.rfind("clamp", 0) == 0) {
    // ReLU6 as ONNX writes it, a clip by constants; torch.clamp(min=0): to +inf
    const double hi = c.epilogue.rfind("relu6", 0) == 0 ? 6.0 : INFINITY;
    const ValueId r6 = g.add(Op::clip, {y, g.add_const({dt, {}}, std::vector<double>{0}), g.add_const({dt, {}}, std::vector<double>{hi})});
    const bool sums = c.epilogue.find(" and sums") != std::string::npos;
    g.set_outputs(sums ? std::vector<ValueId>{r6, y} : std::vector<ValueId>{r6});
    return g;
  }
  if (c.epilogue == "scale")
    y = g.add(Op::hardswish, {g.add(Op::add, {g.add(Op::mul, {y, g.add_param("s", {dt, per})}), g.add_param("t", {dt, per})})});
  g.set_outputs({y});
  return g;
}

Bindings inputs_of(const Graph& g, Bindings* params) {
  RandomInputOptions ro;
  ro.seed = 3;
  Bindings all = random_inputs(g, ro), in;
  for (const auto& [k, v] : all) (g.node(g.find(k)).op == Op::param ? *params : in)[k] = v;
  return in;
}

double compiled_against_interpreter(const Case& c, DType dt, std::string* source, bool last = false) {
  Graph g = build(c, dt, last);
  Bindings params, in = inputs_of(g, &params);
  Bindings all = in;
  for (const auto& [k, v] : params) all[k] = v;
  auto want = interpret(g, all, {DType::f64});
  // Channels first stays channels first: the kernels under test are those
  // (assign_layouts would take the 2-D ones channels last). The Winograd
  // form only for the cases named so: the others test the direct forms.
  CompileOptions co;
  const bool wino = c.name.rfind("winograd", 0) == 0;
  for (const std::string& p : default_pipeline(true))
    if (p != "assign_layouts" && (wino || p != "winograd_weights")) co.passes.push_back(p);
  Executable exe = tj::compile(g, params, co);
  EXPECT_TRUE(exe.stats().compiled);
  // Each convolution is one kernel with its epilogue: nothing of the window
  // form is left. On a GPU every form (codegen/gpu/kernels/conv.cpp); on the
  // CPU f32 and f64, but for the channels-last ones without a kernel of their own.
  const bool cpu = exe.device() == "cpu";
  const bool cl_kernel =
      c.x.size() <= 4 && dt == DType::f32 && (conv_quad_lanes(weight_shape(c), c.groups) > 0 || taps_first_conv(weight_shape(c), c.groups));
  // (A grouped conv of a width no vector form takes keeps only the
  // matrix library's epilogue: a scale and hardswish is a kernel of its own.)
  const bool library_width = cpu && last && cl_kernel && c.groups > 1 && c.w[1] > 1 && 8 % c.w[1] != 0;
  if (!cpu || ((dt == DType::f32 || dt == DType::f64) && (!last || cl_kernel))) {
    EXPECT_EQ(exe.stats().kernels, library_width && c.epilogue == "scale" ? 2u : 1u);
  }
  if (!cpu) {
    EXPECT_NE(exe.source().find("// conv\n"), std::string::npos);
    EXPECT_EQ(exe.source().find("// matmul\n"), std::string::npos);
  }
  EXPECT_EQ(exe.stats().compiler_said, "");  // generated code compiles without a warning
  *source = cpu ? exe.source() : "";
  return compare_outputs(exe.run(in), want).max_rel;
}

// f32: one group and at most 2 spatial dims take the direct forms (on
// packed weights), the rest the window form.
TEST_F(Conv, CompiledMatchesTheInterpreter) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    std::string src;
    EXPECT_LE(compiled_against_interpreter(c, DType::f32, &src), 1e-5);
    if (src.empty()) continue;  // on a device: its one form
    const bool direct = c.groups == 1 && c.x.size() <= 4;
    bool direct_form = false;
    for (const char* f : {"tj_conv_tile<", "tj_conv1x1_tile<", "tj_conv_row_tile<"}) direct_form |= src.find(f) != std::string::npos;
    EXPECT_EQ(direct_form, direct);
    if (c.name.rfind("row form", 0) == 0) {
      EXPECT_NE(src.find("tj_conv_row_tile<"), std::string::npos);
    }
  }
}

// Channels last, f32: one group and groups of 16 outputs and more (the
// direct tiles), depthwise and groups of 2, 4 or 8 (at most 2 spatial dims)
// take their kernels on packed weights; the rest the window form, permuted.
TEST_F(Conv, ChannelsLastCompiledMatchesTheInterpreter) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    std::string src;
    EXPECT_LE(compiled_against_interpreter(c, DType::f32, &src, true), 1e-5);
    if (src.empty()) continue;
    const bool direct = c.x.size() <= 4 && conv_quad_lanes(weight_shape(c), c.groups) > 0, depthwise = c.x.size() <= 4 && c.w[0] == c.groups && c.w[1] == 1;
    EXPECT_EQ(src.find("tj_conv_tile_cl<") != std::string::npos, direct);
    // Runs of positions (tj_cl_run<KW, CG, ...>): CG 1 depthwise; grouped, every case's inner
    // columns go in runs, the borders as runs or one at a time.
    const std::regex dw_run("tj_cl_run<[0-9]+, 1, "), gc_run("tj_cl_run<[0-9]+, ([2-9]|[1-9][0-9]+), ");
    EXPECT_EQ(src.find("tj_dw_cl<") != std::string::npos || std::regex_search(src, dw_run), depthwise);
    EXPECT_EQ(std::regex_search(src, gc_run), c.x.size() <= 4 && grouped(c));
    EXPECT_EQ(src.find("tj_wino_in<") != std::string::npos, c.name.rfind("winograd", 0) == 0);
    EXPECT_EQ(src.find("tj_wino_in<4>") != std::string::npos, c.name.rfind("winograd 4x4", 0) == 0);
    // Its rows read the image through 1 or 2 of the kernel's 3 rows: tiles of those alone.
    if (c.name.rfind("atrous", 0) == 0) {
      EXPECT_NE(src.find("switch (kh1 - kh0)"), std::string::npos);
    }
    // Its two tiles of 7 positions read the image through kernel columns [1, 3) and [0, 2): a call each.
    if (c.name == "atrous, rows and columns") {
      EXPECT_NE(src.find("const int64_t i = 1, ow = 7;"), std::string::npos);
    }
  }
}

// The tiles are sized for the generated code's vectors as its flags give
// them (the compiler probe), not for the CPU's: built with -mno-avx512f on an
// AVX-512 machine (NarrowVectors.Conv reruns this), a block of 64 channels
// takes a row of 28 in tiles of 6 positions, the narrow form's sub-tiles,
// not 7.
TEST_F(Conv, ChannelsLastTilesFitTheGeneratedCodesVectors) {
  const std::optional<Compiler> cxx = find_compiler();
  if (!cxx) GTEST_SKIP() << "no C++ compiler";
  const char* flags = std::getenv("TJ_CXXFLAGS");
  if (flags && std::strstr(flags, "-mno-avx512f")) {
    EXPECT_LT(cxx->vector_bytes, 64);
  } else if (__builtin_cpu_supports("avx512f")) {
    EXPECT_EQ(cxx->vector_bytes, 64);
  }
  const Case c = {"3x3 stride 2, 64 to 64", {1, 64, 56, 56}, {64, 64, 3, 3}, {2, 2}, {}, {1, 1}, {1, 1}, 1, true, ""};  // rows of 28
  std::string src;
  EXPECT_LE(compiled_against_interpreter(c, DType::f32, &src, true), 1e-5);
  if (src.empty()) GTEST_SKIP() << "on a device: its one form";
  EXPECT_NE(src.find(cxx->vector_bytes >= 64 ? "tj_conv_tile_cl<7, 4," : "tj_conv_tile_cl<6, 4,"), std::string::npos);
}

// The direct tiles and the depthwise runs add the bias and apply a ReLU or
// a clip by constants in registers (EP of tj_conv_tile_cl and
// tj_cl_run) where the conv's value is not an output of its own; with
// the sums an output too, the epilogue runs from the
// tile in L1. Both give the same bits, NaN and signed zeros included (x
// holds NaN, +0 and -0; a zero bias keeps sums of -0 at -0 only without one).
TEST_F(Conv, RegisterEpiloguesMatchTheTileEpilogueBitForBit) {
  int checked = 0;
  for (Case c : cases()) {
    // the flat 1x1 form (overlapping tiles too), rows with 4- and 3-vector
    // tiles, stride 2, groups of 16, blocks of 64 inside groups
    static const std::set<std::string> some = {"1x1 over positions", "1x1, 50 positions in overlapping tiles", "64 + 40 channels: 4- and 3-vector tiles",
                                               "stride 2, whole tiles", "groups of 16, stride 2", "groups of 128 outputs",
                                               // depthwise runs, the borders' too
                                               "depthwise, 84 channels", "depthwise 5x5 at 7x7, 40 channels"};
    if (!some.count(c.name)) continue;
    for (const char* e : {"relu", "relu6", "clamp"}) {
      SCOPED_TRACE(c.name + ", " + e);
      std::vector<NDArray> outs[2];
      std::string src[2];
      for (int sums = 0; sums < 2; ++sums) {
        c.epilogue = std::string(e) + (sums ? " and sums" : "");
        Graph g = build(c, DType::f32, true);
        Bindings params, in = inputs_of(g, &params);
        float* x = in.at("x").data<float>();
        x[0] = NAN, x[1] = 0.0f, x[2] = -0.0f, x[in.at("x").numel() - 1] = NAN;
        CompileOptions co;
        for (const std::string& p : default_pipeline(true))
          if (p != "assign_layouts" && p != "winograd_weights") co.passes.push_back(p);
        Executable exe = tj::compile(g, params, co);
        if (exe.device() != "cpu") return;
        outs[sums] = exe.run(in);
        src[sums] = exe.source();
      }
      // Registers; with the sums, the tile in L1, or (a part's weights past
      // the cache: input channel blocks) the epilogue from y in both.
      const bool blocks = src[1].find("for (int64_t cbk") != std::string::npos;
      EXPECT_EQ(src[0].find("tj_tile["), std::string::npos);
      EXPECT_TRUE(blocks || src[1].find("tj_tile[") != std::string::npos);
      ASSERT_EQ(outs[0][0].numel(), outs[1][0].numel());
      const float* a = outs[0][0].data<float>();
      const float* b = outs[1][0].data<float>();
      for (int64_t k = 0, bad = 0; k < outs[0][0].numel() && bad < 5; ++k) {
        const bool same = (std::isnan(a[k]) && std::isnan(b[k])) || std::memcmp(&a[k], &b[k], 4) == 0;
        bad += !same;
        EXPECT_TRUE(same) << "element " << k << ": " << a[k] << " against " << b[k];
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 24);
}

// A mean over every position of a channels-last conv's value, and a sum
// of it reshaped to [N, positions, M], join the conv's kernel (fusion's
// conv_reductions): each form's epilogue adds its positions up, per part,
// into rows that are added in order after the parts. Each form once: the
// depthwise runs (with their borders, one at a time, the epilogue from y),
// the direct tiles (input channel blocks too), the 1x1 runs, Winograd 2x2
// and 4x4, groups, two images, 1-d.
TEST_F(Conv, SumsOverThePositionsJoinTheConvsKernel) {
  static const std::set<std::string> some = {"depthwise 3x3", "depthwise, 3000 channels", "depthwise 5x5 at 7x7, 40 channels",
                                             "depthwise stride 2, pads at the end only", "3x3 same", "4-vector tiles, input channel blocks",
                                             "1x1 over positions, two images", "winograd: no pads, two images, sums too",
                                             "winograd 4x4: odd sizes, 40 channels", "groups of 8, stride 2, 104 channels", "groups of 16, stride 2", "1d"};
  int checked = 0;
  for (const Case& c : cases()) {
    if (!some.count(c.name)) continue;
    SCOPED_TRACE(c.name);
    Graph g = build(c, DType::f32, true);
    const ValueId y = g.outputs()[0];
    const Shape ys = g.type(y).shape;
    std::vector<int64_t> spatial;
    Dim positions(1);
    for (size_t a = 1; a + 1 < ys.size(); ++a) spatial.push_back(static_cast<int64_t>(a)), positions = positions * ys[a];
    const ValueId mean = g.add(Op::mean, {y}, {{"axes", spatial}, {"keepdim", true}});
    const ValueId flat = g.add(Op::reshape, {y}, {{"shape", Shape{ys.front(), positions, ys.back()}}});
    const ValueId sum = g.add(Op::sum, {flat}, {{"axes", std::vector<int64_t>{1}}});
    g.set_outputs({y, mean, sum});
    Bindings params, in = inputs_of(g, &params);
    Bindings all = in;
    for (const auto& [k, v] : params) all[k] = v;
    const auto want = interpret(g, all, {DType::f64});
    CompileOptions co;
    const bool wino = c.name.rfind("winograd", 0) == 0;
    for (const std::string& p : default_pipeline(true))
      if (p != "assign_layouts" && (wino || p != "winograd_weights")) co.passes.push_back(p);
    Executable exe = tj::compile(g, params, co);
    if (exe.device() != "cpu") return;  // the rule is the C++ emitter's
    EXPECT_EQ(exe.stats().kernels, 1u);
    EXPECT_NE(exe.source().find("tj_red["), std::string::npos);
    const auto got = exe.run(in);
    // The conv's value as in the other tests (Winograd's own rounding: 4e-6
    // at 4x4); its sums, each a part's few positions summed in float, closer.
    for (size_t i = 0; i < 3; ++i) EXPECT_LE(compare_outputs({got[i]}, {want[i]}).max_rel, i == 0 || wino ? 1e-5 : 1e-6) << "output " << i;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(some.size()));
}

// g compiled, its outputs checked against the interpreter's in f64.
Executable compiled_against_f64(const Graph& g) {
  Bindings params, in = inputs_of(g, &params);
  Bindings all = in;
  for (const auto& [k, v] : params) all[k] = v;
  Executable exe = tj::compile(g, params);
  EXPECT_LE(compare_outputs(exe.run(in), interpret(g, all, {DType::f64})).max_rel, 1e-5);
  return exe;
}

// 1x1 convs that differ only in their input channels (densenet's, one more
// layer's features each) share one function: the channel count is read at
// run time (tj_k), and each gives the interpreter's results.
TEST_F(Conv, OneByOneConvsAlikeButForTheirInputsShareTheirCode) {
  Graph g = parse_graph(
      "graph g\ninput %a : f32[1,7,8,24]\ninput %b : f32[1,7,8,40]\nparam %w : f32[16,24,1,1]\nparam %v : f32[16,40,1,1]\n"
      "%0 = conv(%a, %w) {channels_last=true} : f32[1,7,8,16]\n%1 = relu(%0) : f32[1,7,8,16]\n"
      "%2 = conv(%b, %v) {channels_last=true} : f32[1,7,8,16]\n%3 = relu(%2) : f32[1,7,8,16]\nreturn %1, %3\n");
  Executable exe = compiled_against_f64(g);
  if (exe.device() != "cpu") return;
  const std::string src = exe.source();
  EXPECT_NE(src.find("static const int64_t tj_k[] = {24};"), std::string::npos);
  EXPECT_NE(src.find("static const int64_t tj_k[] = {40};"), std::string::npos);
  EXPECT_NE(src.find("the code of a kernel alike"), std::string::npos);
}

// Kernels alike that also pass the same sizes (mobilenet's repeated
// blocks) share a function whose code holds those sizes as constants: read
// at run time, a 24-position register tile kept 24 pointers and spilled
// them (mobilenet_v2 and mnasnet1_0 5-9% slower).
TEST_F(Conv, KernelsAlikeWithTheSameSizesShareCodeThatHoldsThemAsConstants) {
  Graph g = parse_graph(
      "graph g\ninput %a : f32[1,14,14,32]\ninput %b : f32[1,14,14,32]\nparam %w : f32[16,32,1,1]\nparam %v : f32[16,32,1,1]\n"
      "%0 = conv(%a, %w) {channels_last=true} : f32[1,14,14,16]\n%1 = relu(%0) : f32[1,14,14,16]\n"
      "%2 = conv(%b, %v) {channels_last=true} : f32[1,14,14,16]\n%3 = relu(%2) : f32[1,14,14,16]\nreturn %1, %3\n");
  Executable exe = compiled_against_f64(g);
  if (exe.device() != "cpu") return;
  const std::string src = exe.source();
  EXPECT_NE(src.find("the code of a kernel alike"), std::string::npos);
  EXPECT_EQ(src.find("tj_k[0]"), std::string::npos);
}

// A channels-last conv of an NCHW image (the first conv of every torchvision
// net through ONNX) reads the image where it lies into its padded copy: no
// transposed copy first.
TEST_F(Conv, APaddedConvOfATransposedImageReadsItInPlace) {
  Graph g = parse_graph(
      "graph g\ninput %x : f32[2,3,9,10]\nparam %w : f32[32,3,3,3]\nparam %c : f32[32]\n"
      "%0 = permute(%x) {perm=[0, 2, 3, 1]} : f32[2,9,10,3]\n"
      "%1 = conv(%0, %w, %c) {channels_last=true, stride=[2,2], pad_begin=[1,1], pad_end=[1,1]} : f32[2,5,5,32]\n"
      "%2 = relu(%1) : f32[2,5,5,32]\nreturn %2\n");
  Executable exe = compiled_against_f64(g);
  if (exe.device() != "cpu") return;
  const std::string src = exe.source();
  EXPECT_NE(src.find("s[w*1LL + c*90LL]"), std::string::npos);
}

// Channel blocks that come to an odd count (192 channels: 3 of 64) take
// one more block of positions, rows or Winograd tiles: an even count of
// parts, which two threads share equally (9 parts kept one thread 5 to the
// other's 4). Each form gives the interpreter's results.
TEST_F(Conv, OddChannelBlocksSplitTheirPositionsIntoAnEvenCountOfParts) {
  const std::string forms[] = {
      // 1x1: 3 blocks of 64 channels by 3 of positions, now 4
      "graph g\ninput %x : f32[1,28,28,32]\nparam %w : f32[192,32,1,1]\n%0 = conv(%x, %w) {channels_last=true} : f32[1,28,28,192]\n"
      "%1 = relu(%0) : f32[1,28,28,192]\nreturn %1\n",
      // 3x3 direct and Winograd: 3 blocks of channels by rows or tile rows
      "graph g\ninput %x : f32[1,14,14,48]\nparam %w : f32[96,48,3,3]\n"
      "%0 = conv(%x, %w) {channels_last=true, pad_begin=[1,1], pad_end=[1,1]} : f32[1,14,14,96]\nreturn %0\n",
      "graph g\ninput %x : f32[1,14,14,64]\nparam %w : f32[192,64,3,3]\n"
      "%0 = conv(%x, %w) {channels_last=true, pad_begin=[1,1], pad_end=[1,1]} : f32[1,14,14,192]\nreturn %0\n",
  };
  for (const std::string& text : forms) {
    SCOPED_TRACE(text);
    Graph g = parse_graph(text);
    Executable exe = compiled_against_f64(g);
    if (exe.device() != "cpu") continue;
    const std::string src = exe.source();
    const std::string open = "tj_slot_runtime], ";
    size_t at = src.find(open);
    ASSERT_NE(at, std::string::npos);
    for (; at != std::string::npos; at = src.find(open, at + 1)) {
      const int64_t parts = std::atoll(src.c_str() + at + open.size());
      EXPECT_TRUE(parts % 2 == 0 || parts == 1) << parts << " parts";
    }
  }
}

// f64: every geometry through the window form's GEMM (CI's sanitizer job
// leaves this one out: the f32 test covers the same kernel code).
TEST_F(Conv, WindowFormInF64) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    std::string src;
    EXPECT_LE(compiled_against_interpreter(c, DType::f64, &src), 1e-12);
  }
}

// 16-bit types: the window form on the CPU, the conv kernel on a GPU
// (summing in float, where the interpreter rounds every step). The cases
// up to the 3-d one: every geometry, each form once.
TEST_F(Conv, SixteenBitTypes) {
  for (const DType dt : {DType::f16, DType::bf16})
    for (const Case& c : cases()) {
      if (c.name == "rows of whole tiles and a tail") break;
      SCOPED_TRACE(c.name + " in " + std::string(dtype_name(dt)));
      std::string src;
      EXPECT_LE(compiled_against_interpreter(c, dt, &src), dt == DType::f16 ? 1e-2 : 5e-2);
    }
}

TEST(ConvOp, WindowFormMatchesTheReferenceKernel) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Graph g = build(c, DType::f64);
    Bindings params, in = inputs_of(g, &params);
    for (const auto& [k, v] : params) in[k] = v;
    Graph lowered = g;
    ASSERT_TRUE(lower_convs(lowered, {}));
    for (const Node& n : lowered.nodes()) ASSERT_NE(n.op, Op::conv);
    Difference d = compare_outputs(interpret(lowered, in, {DType::f64}), interpret(g, in, {DType::f64}));
    EXPECT_LE(d.max_rel, 1e-13);
  }
}

// Channels last: the same values with the channels innermost, in the
// reference kernel and in the window form, exactly.
TEST(ConvOp, ChannelsLastIsThePermutedConv) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Graph g = build(c, DType::f64);
    Bindings params, in = inputs_of(g, &params);
    for (const auto& [k, v] : params) in[k] = v;
    // The input permuted to channels last, the output permuted back.
    Graph cl(c.name);
    const int64_t r = static_cast<int64_t>(c.x.size());
    Shape xs;
    for (int64_t d : c.x) xs.push_back(Dim(d));
    const ValueId x = cl.add_input("x", {DType::f64, xs});
    Shape ws;
    for (int64_t d : c.w) ws.push_back(Dim(d));
    std::vector<ValueId> ops{cl.add(Op::permute, {x}, {{"perm", channels_last_perm(r)}}), cl.add_param("w", {DType::f64, ws})};
    if (c.bias) ops.push_back(cl.add_param("b", {DType::f64, {Dim(c.w[0])}}));
    const ValueId y = cl.add(Op::conv, ops, {{"stride", c.stride}, {"dilation", c.dilation}, {"pad_begin", c.pad_begin}, {"pad_end", c.pad_end},
                                             {"groups", c.groups}, {"channels_last", true}});
    cl.set_outputs({cl.add(Op::permute, {y}, {{"perm", channels_first_perm(r)}})});
    Graph plain(c.name);
    {
      const ValueId px = plain.add_input("x", {DType::f64, xs});
      std::vector<ValueId> po{px, plain.add_param("w", {DType::f64, ws})};
      if (c.bias) po.push_back(plain.add_param("b", {DType::f64, {Dim(c.w[0])}}));
      plain.set_outputs({plain.add(Op::conv, po, {{"stride", c.stride}, {"dilation", c.dilation}, {"pad_begin", c.pad_begin}, {"pad_end", c.pad_end},
                                                 {"groups", c.groups}})});
    }
    Bindings pin;
    for (const auto& [k, v] : in)
      if (plain.find(k) >= 0) pin[k] = v;
    const auto want = interpret(plain, pin, {DType::f64});
    EXPECT_EQ(compare_outputs(interpret(cl, pin, {DType::f64}), want).max_rel, 0.0);
    Graph lowered = cl;
    ASSERT_TRUE(lower_convs(lowered, {}));
    EXPECT_LE(compare_outputs(interpret(lowered, pin, {DType::f64}), want).max_rel, 1e-13);
  }
  EXPECT_NE(print_graph(parse_graph("graph g\ninput %x : f32[1,8,8,6]\nparam %w : f32[4,6,3,3]\n%y = conv(%x, %w) {channels_last=true} : f32[1,6,6,4]\nreturn %y\n"))
                .find("channels_last=true} : f32[1,6,6,4]"),
            std::string::npos);
}

TEST(ConvOp, TextRoundTrip) {
  Graph g = build(cases()[8], DType::f32);
  const std::string text = print_graph(g);
  EXPECT_NE(text.find("conv(%x, %w, %b) {stride=[1, 1], dilation=[1, 1], pad_begin=[0, 1], pad_end=[2, 0], groups=4}"), std::string::npos) << text;
  EXPECT_EQ(print_graph(parse_graph(text)), text);
}

TEST(ConvOp, ClearErrors) {
  auto message = [](const std::string& text) {
    try {
      parse_graph(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string head = "graph g\ninput %x : f32[1,6,8,8]\n";
  EXPECT_NE(message(head + "param %w : f32[4,3,3,3]\n%y = conv(%x, %w) {groups=4} : f32[1,4,6,6]\nreturn %y\n").find("do not match groups 4"),
            std::string::npos);
  EXPECT_NE(message(head + "param %w : f32[4,6,3,3]\n%y = conv(%x, %w) {dilation=[4, 4]} : f32[1,4,1,1]\nreturn %y\n").find("output would be empty"),
            std::string::npos);
  EXPECT_NE(message(head + "param %w : f32[4,6,3]\n%y = conv(%x, %w) : f32[1,4,6]\nreturn %y\n").find("must be [N, C, d..]"), std::string::npos);
  EXPECT_NE(message(head + "param %w : f32[4,6,3,3]\n%y = conv(%x, %w) {stride=[1]} : f32[1,4,6,6]\nreturn %y\n").find("stride has 1 values"),
            std::string::npos);
  // A layout mismatch: channels-first data given to a channels-last conv.
  const std::string cl = message(head + "param %w : f32[4,6,3,3]\n%y = conv(%x, %w) {channels_last=true} : f32[1,6,6,4]\nreturn %y\n");
  EXPECT_NE(cl.find("input channels 8 (of f32[1,6,8,8], [N, d.., C] (channels last)) and weights f32[4,6,3,3] do not match"), std::string::npos) << cl;
  // The Winograd form: only for the convs its kernel computes, with its inputs.
  const std::string last = "graph g\ninput %x : f32[1,8,8,16]\nparam %w : f32[4,16,3,3]\nparam %b : f32[4]\nparam %u : f32[1,16,16,64]\n";
  EXPECT_NE(message(last + "%y = conv(%x, %w, %b, %u) {stride=[2, 2], channels_last=true, winograd=true} : f32[1,3,3,4]\nreturn %y\n")
                .find("winograd needs a channels-last f32 3x3 conv with one group, stride 1"),
            std::string::npos);
  EXPECT_NE(message(last + "%y = conv(%x, %w, %b) {channels_last=true, winograd=true} : f32[1,6,6,4]\nreturn %y\n").find("f32[1,16,16,64] (F(2x2, 3x3)) or f32[1,36,16,64] (F(4x4, 3x3)), as inputs 3 and 4"),
            std::string::npos);
  EXPECT_NE(message(last + "%y = conv(%x, %w, %b, %u) {channels_last=true} : f32[1,6,6,4]\nreturn %y\n").find("a fourth input (the Winograd-domain weights) needs winograd=true"),
            std::string::npos);
  EXPECT_EQ(message(last + "%y = conv(%x, %w, %b, %u) {channels_last=true, winograd=true} : f32[1,6,6,4]\nreturn %y\n"), "no error");
  // F(4x4, 3x3): 36 points; no other count.
  for (const char* points : {"36", "25"}) {
    const std::string u = "graph g\ninput %x : f32[1,8,8,16]\nparam %w : f32[4,16,3,3]\nparam %b : f32[4]\nparam %u : f32[1," + std::string(points) + ",16,64]\n";
    const std::string m = message(u + "%y = conv(%x, %w, %b, %u) {channels_last=true, winograd=true} : f32[1,6,6,4]\nreturn %y\n");
    EXPECT_EQ(m == "no error", std::string(points) == "36") << m;
  }
}

}  // namespace
}  // namespace tj

namespace tj {
namespace {

// Max pooling channels last (f32, 2 spatial dims: its kernel), against the
// interpreter's reference kernel, exactly: a maximum rounds nothing.
struct PoolCase {
  std::string name;
  std::vector<int64_t> x, kernel, stride, dilation, pad_begin, pad_end;  // x [N, H, W, C]
  std::string epilogue = "";
};

// Max and sum pools in both layouts (a sum divided by its window counts:
// an average pool), bit for bit against the interpreter: on random inputs,
// on -0 everywhere, where a window with a pad sums to +0 and one without to
// -0, and with NaNs (a max's payloads too), zeros and infinities among them. Channels first, the CPU runs the window form.
TEST_F(Conv, PoolsMatchTheInterpreterBitForBit) {
  const std::vector<PoolCase> cases = {
      {"resnet's 3x3 stride 2", {1, 12, 12, 64}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, "relu"},
      {"2x2 stride 2, 20 channels", {2, 8, 10, 20}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}},
      {"3x3 stride 1 same, residual", {1, 7, 9, 16}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, "residual"},
      {"dilated, ceil-mode end pad", {1, 11, 10, 5}, {3, 2}, {2, 3}, {2, 2}, {2, 0}, {2, 3}},
      {"windows all padding", {1, 3, 3, 4}, {2, 2}, {1, 1}, {1, 1}, {2, 2}, {0, 0}},
      {"poolformer's 3x3 average", {1, 14, 14, 64}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, "average"},
  };
  for (const bool last : {true, false})
  for (const Op op : {Op::max_pool, Op::sum_pool})
    for (const PoolCase& c : cases) {
      SCOPED_TRACE(c.name + std::string(op == Op::max_pool ? " (max" : " (sum") + (last ? ", channels last)" : ", channels first)"));
      Graph g(c.name);
      Shape xs;
      for (int64_t d : c.x) xs.push_back(Dim(d));
      if (!last) xs = {xs[0], xs[3], xs[1], xs[2]};
      ValueId y = g.add(op, {g.add_input("x", {DType::f32, xs})},
                        {{"kernel", c.kernel}, {"stride", c.stride}, {"dilation", c.dilation}, {"pad_begin", c.pad_begin}, {"pad_end", c.pad_end},
                         {"channels_last", last}});
      if (c.epilogue == "relu") y = g.add(Op::relu, {y});
      if (c.epilogue == "residual") y = g.add(Op::add, {y, g.add_input("r", g.type(y))});
      if (c.epilogue == "average") {
        Shape counts = g.type(y).shape;
        counts[0] = counts[last ? 3 : 1] = Dim(1);
        y = g.add(Op::div, {y, g.add_input("counts", {DType::f32, counts})});
      }
      g.set_outputs({y});
      Bindings params, in = inputs_of(g, &params);
      Executable exe = tj::compile(g, params, CompileOptions{});
      ASSERT_TRUE(exe.stats().compiled);
      // One kernel, but channels first on the CPU (the window form there).
      const bool cpu = exe.device() == "cpu";
      if (!cpu || last) {
        EXPECT_EQ(exe.stats().kernels, 1u);
        const char* cpu_form = op == Op::max_pool ? "tj_pool_cl<false>(" : "tj_pool_cl<true>(";
        EXPECT_NE(exe.source().find(cpu ? cpu_form : op == Op::max_pool ? "// max_pool\n" : "// sum_pool\n"), std::string::npos);
      }
      // Random inputs, then -0 everywhere, then special values among them:
      // NaNs of either sign with payloads of their own (a max keeps the
      // first in its window's order), zeros of both signs and infinities.
      for (int fill : {0, 1, 2}) {
        const bool zeros = fill == 1;
        NDArray& x = in.at("x");
        for (int64_t i = 0; i < x.numel(); ++i) {
          float& v = x.data<float>()[i];
          if (fill == 1) v = -0.0f;
          if (fill == 2 && i % 3 == 0) {
            const uint32_t payload = static_cast<uint32_t>(i) & 0x3fffff;
            const float special[6] = {std::bit_cast<float>(0x7fc00000u | payload), std::bit_cast<float>(0xffc00000u | payload), 0.0f, -0.0f,
                                      INFINITY, -INFINITY};
            v = special[(i / 3) % 6];
          }
        }
        const auto want = interpret(g, in, {DType::f32});
        const auto got = exe.run(in);
        ASSERT_EQ(got.size(), 1u);
        const float* a = got[0].data<float>();
        const float* b = want[0].data<float>();
        for (int64_t i = 0; i < got[0].numel(); ++i) {
          // A sum of two NaNs carries one of their payloads, and which one
          // is the compiler's to choose: it takes float addition as
          // commutative (GCC at -O1 under the sanitizers swapped them). A
          // max's NaN is the first in the window's order, selects that no
          // compiler reorders.
          if (op == Op::sum_pool && std::isnan(b[i])) {
            ASSERT_TRUE(std::isnan(a[i])) << "at " << i << ": " << a[i] << " where the interpreter has NaN";
            continue;
          }
          ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i])) << "at " << i << (zeros ? " (-0 input)" : fill == 2 ? " (special values)" : "") << ": " << a[i] << " vs " << b[i];
        }
      }
    }
}

// The sum_pool matched from an average pool's window form (match_pools) is
// the window form's value bit for bit in the reference kernel, f32 and f64.
TEST(ConvOp, SumPoolIsItsWindowForm) {
  for (const DType dt : {DType::f32, DType::f64}) {
    Graph g("sum");
    const ValueId y = g.add(Op::sum_pool, {g.add_input("x", {dt, {Dim(2), Dim(3), Dim(9), Dim(8)}})},
                            {{"kernel", std::vector<int64_t>{3, 2}}, {"stride", std::vector<int64_t>{2, 1}}, {"dilation", std::vector<int64_t>{1, 2}},
                             {"pad_begin", std::vector<int64_t>{1, 0}}, {"pad_end", std::vector<int64_t>{1, 2}}});
    g.set_outputs({y});
    Bindings params, in = inputs_of(g, &params);
    Graph lowered = g;
    ASSERT_TRUE(lower_convs(lowered, {}));
    for (const Node& n : lowered.nodes()) ASSERT_NE(n.op, Op::sum_pool);
    EXPECT_TRUE(compare_outputs(interpret(lowered, in, {dt}), interpret(g, in, {dt})).bit_identical);
  }
}

}  // namespace
}  // namespace tj
