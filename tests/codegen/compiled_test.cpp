// Compiled code against the interpreter: the models, prefill and decode,
// f32 and f64, and random graphs.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "codegen/cpp/build.h"
#include "codegen/on_device.h"
#include "compiler/compile.h"
#include "ir/text.h"
#include "memory/lifetimes.h"
#include "models/llama.h"
#include "passes/pipeline.h"
#include "reference/random_inputs.h"
#include "runtime/thread_pool.h"
#include "schedule/fusion.h"
#include "support/random_graph.h"
#include "support/scratch.h"
#include "tensorjit/tensor.h"

namespace tj {
namespace {

class Compiled : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::use_scratch_cache("compiled");
  }
  void SetUp() override { TJ_SKIP_WITHOUT_TEST_DEVICE(); }
};

// Splits seeded random bindings into params and inputs.
void split(const Graph& g, const Bindings& all, Bindings* params, Bindings* inputs) {
  for (const auto& [k, v] : all) (g.node(g.find(k)).op == Op::param ? *params : *inputs)[k] = v;
}

double check(const Graph& g, double pos, DType dt, uint64_t seed = 1, const CompileOptions& co = {}) {
  RandomInputOptions ro;
  ro.seed = seed;
  if (g.find("pos") >= 0) ro.fixed["pos"] = pos;
  Bindings all = random_inputs(g, ro);
  auto want = interpret(g, all, {dt});
  Bindings params, inputs;
  split(g, all, &params, &inputs);
  Executable exe = tj::compile(g, params, co);
  EXPECT_TRUE(exe.stats().compiled);
  auto got = exe.run(inputs);
  Difference d = compare_outputs(got, want);
  EXPECT_FALSE(d.max_abs == 0 && dt == DType::f32 && g.size() > 20) << "suspiciously identical";
  std::printf("[ compiled ] %s %s: %zu kernels, max rel diff %.2e\n", g.name().c_str(), std::string(dtype_name(dt)).c_str(),
              exe.stats().kernels, d.max_rel);
  return d.max_rel;
}

TEST_F(Compiled, TinyLayerPrefillAndDecode) {
  const auto& c = models::llama_config("tiny");
  for (DType dt : {DType::f32, DType::f64}) {
    double tol = dt == DType::f32 ? 1e-5 : 1e-12;
    EXPECT_LE(check(models::trace_llama_layer(c, {1, 16, 16, dt}), 0, dt), tol);
    EXPECT_LE(check(models::trace_llama_layer(c, {2, 5, 12, dt}), 3, dt), tol);
    EXPECT_LE(check(models::trace_llama_layer(c, {1, 1, 64, dt}), 40, dt), tol);
  }
}

// A view that two products both copy for BLAS (%x here) is a temporary of
// each kernel under one table slot: its memory must not be another
// temporary's in either kernel (a backward graph's dq, read by dx = dq W^T
// and dW = h^T dq, met this).
TEST_F(Compiled, AViewCopiedByTwoProductsKeepsItsOwnTemporary) {
  Graph g = parse_graph(
      "graph g\ninput %a : f64[2,8,5,16]\ninput %b : f64[2,8,5,16]\ninput %c : f64[2,5,7]\n"
      "%0 = permute(%a) {perm=[0, 2, 1, 3]} : f64[2,5,8,16]\n%v = reshape(%0) {shape=[2, 5, 128]} : f64[2,5,128]\n"
      "%1 = permute(%b) {perm=[0, 2, 1, 3]} : f64[2,5,8,16]\n%2 = reshape(%1) {shape=[2, 5, 128]} : f64[2,5,128]\n"
      "%x = permute(%2) {perm=[0, 2, 1]} : f64[2,128,5]\n"
      "%4 = matmul(%v, %x) : f64[2,5,5]\n%5 = matmul(%x, %c) : f64[2,128,7]\nreturn %4, %5\n");
  EXPECT_LE(check(g, 0, DType::f64), 1e-12);
}

TEST_F(Compiled, EveryModel) {
  const auto& c = models::llama_config("tiny");
  EXPECT_LE(check(models::trace_mlp(c, {2, 7, 7, DType::f32}), 0, DType::f32), 1e-5);
  EXPECT_LE(check(models::trace_llama(c, {1, 6, 9, DType::f32}, 2), 0, DType::f32), 1e-5);
  EXPECT_LE(check(models::trace_llama(c, {1, 1, 9, DType::f64}, 2), 6, DType::f64), 1e-12);
}

// Every fusion rule off, attention not matched, no reordering, no passes.
TEST_F(Compiled, WithEachRuleAndPassSwitchedOff) {
  const auto& c = models::llama_config("tiny");
  Graph prefill = models::trace_llama_layer(c, {1, 8, 12, DType::f32});
  Graph decode = models::trace_llama_layer(c, {1, 1, 12, DType::f32});
  std::vector<CompileOptions> variants(7);
  variants[0].fusion.epilogue = false;
  variants[1].fusion.pointwise = false;
  variants[2].fusion.rowwise = false;
  variants[3].fusion = FusionOptions::none();
  variants[4].fusion.horizontal = true;
  variants[5].reorder = false;
  variants[6].passes = {"freeze", "cse", "simplify", "decompose", "dce"};  // no flash_attn, no norm folding
  for (const auto& co : variants) {
    EXPECT_LE(check(prefill, 2, DType::f32, 3, co), 1e-5);
    EXPECT_LE(check(decode, 7, DType::f32, 4, co), 1e-5);
  }
  CompileOptions raw;
  raw.passes = {"freeze"};  // composites stay whole: rowwise softmax and norms
  EXPECT_LE(check(prefill, 1, DType::f32, 5, raw), 1e-5);
}

// The ops added through their rows alone, fused with their neighbours: a
// matmul's epilogue, a row kernel (softmax, a row sum, argmax lowered into
// row maxima), a reduction over the leading axis; against the interpreter,
// with the default passes (gelu decomposed) and without (each row's own C).
TEST_F(Compiled, RowOpsFuseWithTheirNeighbours) {
  for (DType dt : {DType::f64, DType::f32}) {
    Tracer t("row_ops");
    Tensor x = t.input("x", dt, {6, 20});
    Tensor w = t.param("w", dt, {20, 24});
    Tensor a = matmul(x, w);
    Tensor e = leaky_relu(gelu(a, false), 0.2) + hardswish(a) * sign(a) + clip(a, -0.5, 0.5);
    Tensor f = softplus(e) + mod(e, t.scalar(0.7, dt)) + mod(e, t.scalar(0.3, dt), true) + round(e * 4.0) + floor(e) - ceil(e);
    Tensor mask = logical_and(gt(f, t.scalar(0, dt)), logical_not(lt(e, t.scalar(-0.25, dt))));
    Tensor h = where(mask, log1p(abs(f)), expm1(clip(f, -1, 1))) + erf(e) + relu(f) + gelu(f);
    Graph g = t.finish({softmax(h, -1), sum(h, {1}), sum(relu(e), {0}), argmax(h, -1), argmax(softmax(h, -1), 0, true)});
    CompileOptions own_c;
    own_c.passes = {"freeze", "cse"};
    for (const CompileOptions& co : {CompileOptions{}, own_c}) {
      EXPECT_LE(check(g, 0, dt, 7, co), dt == DType::f64 ? 1e-12 : 1e-5);
      // Every new pointwise op is in the matmul's epilogue.
      Executable exe = tj::compile(g, {{"w", random_inputs(g, {}).at("w")}}, co);
      const Graph& opt = exe.optimized();
      Schedule sch = fuse(opt);
      ASSERT_EQ(sch.kernels[0].kind, KernelKind::matmul);
      std::set<Op> in_epilogue;
      for (ValueId v : sch.kernels[0].ops) in_epilogue.insert(opt.node(v).op);
      for (Op op : {Op::erf, Op::floor, Op::ceil, Op::round, Op::sign, Op::log1p, Op::expm1, Op::relu, Op::softplus, Op::leaky_relu,
                    Op::hardswish, Op::mod, Op::clip, Op::logical_and, Op::logical_not, Op::where})
        EXPECT_TRUE(in_epilogue.count(op)) << op_def(op).name << " is not fused into the matmul";
      EXPECT_LE(exe.stats().kernels, 9u);
    }
  }
}

// The rest of <math.h> (tan, the inverse and hyperbolic functions, trunc,
// atan2) in a matmul's epilogue, and the integer bitwise ops, bit for bit.
TEST_F(Compiled, MathAndBitwiseOps) {
  for (DType dt : {DType::f64, DType::f32}) {
    Tracer t("math_ops");
    Tensor x = t.input("x", dt, {5, 12});
    Tensor w = t.param("w", dt, {12, 9});
    Tensor a = tanh(matmul(x, w)) * 0.9;  // in (-0.9, 0.9): every function's domain
    Tensor e = tan(a) + asin(a) + acos(a) + atan(a * 3.0) + sinh(a) + cosh(a) + asinh(a * 5.0) + acosh(abs(a) + 1.5) + atanh(a) +
               trunc(a * 7.0) + atan2(a, a * a - 0.3);
    Graph g = t.finish({e});
    EXPECT_LE(check(g, 0, dt, 11), dt == DType::f64 ? 1e-12 : 1e-5);
    Executable exe = tj::compile(g, {{"w", random_inputs(g, {}).at("w")}});
    EXPECT_EQ(fuse(exe.optimized()).kernels.size(), 1u);  // all in the matmul's epilogue
  }
  for (DType dt : {DType::i64, DType::i32, DType::u8, DType::i8}) {
    Tracer t("bits");
    Tensor a = t.input("a", dt, {7, 3}), b = t.input("b", dt, {3});
    Tensor s = abs(b) - (abs(b) / t.scalar(9, dt)) * t.scalar(9, dt);  // shift counts from 0 to 8
    Graph g = t.finish({bitwise_and(a, b), bitwise_or(a, b), bitwise_xor(bitwise_not(a), b), shift_left(a, s), shift_right(a, s)});
    Bindings in = random_inputs(g, {});
    auto want = interpret(g, in, {DType::f64});
    auto got = tj::compile(g, {}).run(in);
    for (size_t o = 0; o < want.size(); ++o) {
      ASSERT_EQ(got[o].type_str(), want[o].type_str());
      EXPECT_EQ(std::memcmp(got[o].raw(), want[o].raw(), want[o].nbytes()), 0) << dtype_name(dt) << " output " << o;
    }
  }
  // Not for bools or floats: a clear error.
  Tracer t("bad");
  EXPECT_THROW(bitwise_and(t.input("p", DType::boolean, {2}), t.input("q", DType::boolean, {2})), ShapeError);
  EXPECT_THROW(bitwise_not(t.input("f", DType::f32, {2})), ShapeError);
  EXPECT_THROW(tan(t.input("i", DType::i32, {2})), ShapeError);
}

TEST_F(Compiled, RandomGraphs) {
  for (uint64_t seed = 0; seed < 16; ++seed) {
    Graph g = testing::random_graph(seed, DType::f64, 16);
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + print_graph(g));
    EXPECT_LE(check(g, 0, DType::f64, seed), 1e-12);
  }
}

// Squeeze-excitation as an exported convnet has it (channels first): the
// gate scales the packed weights of the 1x1 conv after it, per call
// (fold_input_scale), and the conv kernel reads that scaled copy; 20x20
// positions, 24 outputs of 16 channels.
TEST_F(Compiled, SqueezeExcitationGateOnTheWeights) {
  Graph g = parse_graph(
      "graph se\ninput %x : f32[1,16,20,20]\nparam %wd : f32[16,1,3,3]\nparam %wa : f32[4,16,1,1]\nparam %wb : f32[16,4,1,1]\n"
      "param %w : f32[24,16,1,1]\nparam %b : f32[24]\n"
      "%0 = conv(%x, %wd) {pad_begin=[1, 1], pad_end=[1, 1], groups=16} : f32[1,16,20,20]\n%1 = relu(%0) : f32[1,16,20,20]\n"
      "%2 = mean(%1) {axes=[2, 3]} : f32[1,16]\n%3 = reshape(%2) {shape=[1, 16, 1, 1]} : f32[1,16,1,1]\n"
      "%4 = conv(%3, %wa) : f32[1,4,1,1]\n%5 = relu(%4) : f32[1,4,1,1]\n%6 = conv(%5, %wb) : f32[1,16,1,1]\n%7 = sigmoid(%6) : f32[1,16,1,1]\n"
      "%8 = mul(%1, %7) : f32[1,16,20,20]\n%9 = conv(%8, %w, %b) : f32[1,24,20,20]\nreturn %9\n");
  EXPECT_LE(check(g, 0, DType::f32), 1e-5);
  RandomInputOptions ro;
  Bindings all = random_inputs(g, ro), params, inputs;
  split(g, all, &params, &inputs);
  Executable exe = tj::compile(g, params);
  int scaled = 0;  // mul(Wq [1, 1, 1, 16, 64], the gate)
  for (const Node& n : exe.optimized().nodes()) scaled += n.op == Op::mul && n.type.shape == Shape{1, 1, 1, 16, 64};
  EXPECT_EQ(scaled, 1);
}

// kv_write that cannot be in place (the old cache is still read), gather
// indices computed by a kernel, a matmul reading a permuted operand.
TEST_F(Compiled, ReviewCases) {
  const char* kv =
      "graph g\ninput %cache : f64[1,1,4,2]\ninput %rows : f64[1,1,1,2]\ninput %pos : i64[]\n"
      "%0 = kv_write(%cache, %rows, %pos) : f64[1,1,4,2]\n%1 = exp(%0) : f64[1,1,4,2]\n%2 = exp(%cache) : f64[1,1,4,2]\n"
      "%3 = sub(%1, %2) : f64[1,1,4,2]\nreturn %3, %0\n";
  EXPECT_LE(check(parse_graph(kv), 2, DType::f64), 1e-12);
  const char* gidx =
      "graph g\ninput %t : f64[10,3]\ninput %i : i64[2,4]\n%0 = sum(%i) {axes=[1]} : i64[2]\n"
      "%1 = reshape(%0) {shape=[2, 1]} : i64[2,1]\n%2 = gather(%t, %1) : f64[2,1,3]\n%3 = exp(%2) : f64[2,1,3]\nreturn %3\n";
  EXPECT_LE(check(parse_graph(gidx), 0, DType::f64), 1e-12);
  const char* perm =
      "graph g\ninput %x : f64[5,4]\nparam %w : f64[4,4]\n%0 = matmul(%x, %w) : f64[5,4]\n%1 = exp(%0) : f64[5,4]\n"
      "%2 = permute(%1) {perm=[1, 0]} : f64[4,5]\n%3 = matmul(%2, %x) : f64[4,4]\n%4 = add(%0, %0) : f64[5,4]\nreturn %3, %4\n";
  EXPECT_LE(check(parse_graph(perm), 0, DType::f64), 1e-12);
}

// flash_attn's two paths against the interpreter: blocks of rows (query,
// head) over transposed blocks of keys, and one query of one head at a time
// (a KV head read by one row): row counts that are not a multiple of the
// block, several blocks of keys with a partial last one, causal with an
// offset (and with a negative one, where the first queries see no key: NaN
// in both), grouped-query heads (decode too), a symbolic query count, f32
// and f64.
TEST_F(Compiled, FlashAttentionBlocksOfQueriesAndKeys) {
  auto graph = [](const std::string& dt, const std::string& tq, int64_t s, bool causal, int kv_heads = 2) {
    std::string h = "[1,4," + tq + ",16]", kv = "[1," + std::to_string(kv_heads) + "," + std::to_string(s) + ",16]";
    return "graph g\ninput %q : " + dt + h + "\ninput %k : " + dt + kv + "\ninput %v : " + dt + kv + "\n" +
           (causal ? "input %pos : i64[]\n%0 = flash_attn(%q, %k, %v, %pos) {scale=0.25, causal=true} : "
                   : "%0 = flash_attn(%q, %k, %v) {scale=0.25} : ") +
           dt + h + "\nreturn %0\n";
  };
  for (const char* dt : {"f32", "f64"}) {
    DType d = std::string(dt) == "f32" ? DType::f32 : DType::f64;
    double tol = d == DType::f32 ? 1e-5 : 1e-12;
    EXPECT_LE(check(parse_graph(graph(dt, "37", 150, false)), 0, d), tol);
    EXPECT_LE(check(parse_graph(graph(dt, "37", 150, true)), 113, d), tol);  // the last query sees all 150 keys
    EXPECT_LE(check(parse_graph(graph(dt, "16", 16, true)), 0, d), tol);
    EXPECT_LE(check(parse_graph(graph(dt, "1", 150, true)), 149, d), tol);     // decode: 2 rows per KV head
    EXPECT_LE(check(parse_graph(graph(dt, "1", 150, true, 4)), 149, d), tol);  // decode, one row per KV head
    EXPECT_LE(check(parse_graph(graph(dt, "9", 40, true, 1)), 31, d), tol);    // 36 rows on one KV head
    EXPECT_LE(check(parse_graph(graph(dt, "20", 90, true)), 70, d), tol);
  }
  // A negative offset: queries 0-2 see no key (NaN), the rest see 1..17.
  Graph neg = parse_graph(graph("f64", "20", 90, true));
  RandomInputOptions ro;
  ro.fixed["pos"] = -3;
  Bindings all = random_inputs(neg, ro);
  auto want = interpret(neg, all, {DType::f64});
  Executable exe = tj::compile(neg, {});
  auto got = exe.run(all);
  const double* w = want[0].data<double>();
  const double* g = got[0].data<double>();
  for (int64_t i = 0; i < want[0].numel(); ++i) {
    if (std::isnan(w[i])) EXPECT_TRUE(std::isnan(g[i])) << i;
    else EXPECT_NEAR(g[i], w[i], 1e-12) << i;
  }
  EXPECT_TRUE(std::isnan(g[0]));
  // Symbolic query count T, compiled once, at T = 5 and 33.
  Graph sym = parse_graph(graph("f32", "T", 70, true));
  for (int64_t t : {5, 33}) {
    RandomInputOptions so;
    so.fixed["pos"] = 70 - t;
    so.sizes["T"] = t;
    Bindings b = random_inputs(sym, so);
    Difference diff = compare_outputs(tj::compile(sym, {}).run(b), interpret(sym, b, {DType::f32}));
    EXPECT_LE(diff.max_rel, 1e-5) << "T = " << t;
  }
}

// Weights stored as bf16 or int8 (quantize_weights): decode reads them
// converted in the GEMV, prefill through a converted temporary; each against
// f32 within the format's error (issue 16's bounds: 1e-2 bf16, 5e-2 int8).
TEST_F(Compiled, WeightsStoredNarrower) {
  const auto& c = models::llama_config("tiny");
  for (int64_t tokens : {1, 5}) {
    Graph g = models::trace_llama_layer(c, {1, tokens, 16, DType::f32});
    RandomInputOptions ro;
    ro.seed = 2;
    ro.fixed["pos"] = 16 - tokens;
    Bindings all = random_inputs(g, ro), params, inputs;
    split(g, all, &params, &inputs);
    Bindings f32_in = inputs;
    std::vector<NDArray> base = tj::compile(g, params).run(f32_in);
    for (DType w : {DType::bf16, DType::i8}) {
      SCOPED_TRACE(std::string(dtype_name(w)) + ", tokens " + std::to_string(tokens));
      CompileOptions co;
      co.weights = w;
      co.program_cache = w == DType::bf16;  // int8 without it: freezing's unused params stay in the optimized graph
      Executable exe = tj::compile(g, params, co);
      int narrow = 0;
      for (const Node& n : exe.optimized().nodes()) narrow += n.op == Op::cast;
      EXPECT_GT(narrow, 0);
      Bindings in = inputs;
      std::vector<NDArray> got = exe.run(in);
      EXPECT_LE(compare_outputs({got[0]}, {base[0]}).max_rel, w == DType::bf16 ? 1e-2 : 5e-2);
      EXPECT_GT(compare_outputs({got[0]}, {base[0]}).max_abs, 0);  // the format's error is there
      // The kernels against the interpreter on the converted weights
      // (dequantize, then f32): they add only f32 rounding.
      Bindings ref_in = exe.held_params();
      for (const auto& [k, v] : inputs) ref_in[k] = v;
      EXPECT_LE(compare_outputs(got, interpret(exe.optimized(), ref_in, {DType::f32})).max_rel, 1e-5);
    }
  }
  CompileOptions bad;
  bad.weights = DType::f16;
  Graph g = models::trace_llama_layer(c, {1, 1, 16, DType::f32});
  Bindings all = random_inputs(g, 1), params, inputs;
  split(g, all, &params, &inputs);
  EXPECT_THROW(tj::compile(g, params, bad), Error);
}

// scatter_add (gather's gradient): repeated and negative indices along a
// middle axis, then a large one whose columns split over the pool, each
// element's sum in the indices' order as the interpreter's (bit for bit); an
// index out of range is an error.
TEST_F(Compiled, ScatterAdd) {
  const char* mid =
      "graph g\ninput %b : f32[2,5,3]\ninput %i : i64[7]\ninput %u : f32[2,7,3]\n%0 = scatter_add(%b, %i, %u) {axis=1} : f32[2,5,3]\n"
      "%1 = exp(%0) : f32[2,5,3]\nreturn %1\n";
  Graph g = parse_graph(mid);
  Bindings in = random_inputs(g, 4);
  const std::vector<double> idx = {0, 4, -1, 4, 2, -5, 4};
  for (size_t k = 0; k < idx.size(); ++k) in.at("i").set(static_cast<int64_t>(k), idx[k]);
  Executable exe = tj::compile(g, {});
  Bindings run_in = in;
  EXPECT_LE(compare_outputs(exe.run(run_in), interpret(g, in, {DType::f32})).max_rel, 1e-6);
  in.at("i").set(3, 5);
  run_in = in;
  EXPECT_THROW(exe.run(run_in), Error);

  Graph big = parse_graph(
      "graph e\ninput %i : i64[300]\ninput %u : f32[300,256]\n%0 = const {value=0.0} : f32[]\n%1 = expand(%0) {shape=[64, 256]} : f32[64,256]\n"
      "%2 = scatter_add(%1, %i, %u) : f32[64,256]\nreturn %2\n");
  Bindings bin = random_inputs(big, 5);
  Executable be = tj::compile(big, {});
  Bindings brun = bin;
  NDArray got = be.run(brun)[0], want = interpret(big, bin, {DType::f32})[0];
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0);
}

// flash_attn's backward kernels (attn_lse, attn_dq, attn_dkv): grouped
// heads, causal at an offset (the first queries seeing no key, then all),
// a bias broadcast over heads, across blocks of keys and over the pool (the
// large case), in f32 and f64, and with symbolic lengths.
TEST_F(Compiled, AttentionBackwardKernels) {
  auto graph = [](const std::string& dt, const std::string& t, const std::string& s, int64_t d, bool causal, bool bias) {
    std::string q = dt + "[2,4," + t + "," + std::to_string(d) + "]", kv = dt + "[2,2," + s + "," + std::to_string(d) + "]";
    std::string v = dt + "[2,2," + s + ",8]", o = dt + "[2,4," + t + ",8]", rows = dt + "[2,4," + t + "]";
    std::string opt = std::string(causal ? ", %pos" : "") + (bias ? ", %bias" : "");
    std::string attrs = std::string("{scale=0.25") + (causal ? ", causal=true" : "") + (bias ? ", bias=true" : "") + "}";
    return "graph g\ninput %q : " + q + "\ninput %k : " + kv + "\ninput %v : " + v + "\ninput %dout : " + o + "\ninput %delta : " +
           rows + "\n" + (causal ? "input %pos : i64[]\n" : "") + (bias ? "input %bias : " + dt + "[2,1," + t + "," + s + "]\n" : "") +
           "%0 = attn_lse(%q, %k" + opt + ") " + attrs + " : " + rows + "\n" +
           "%1 = attn_dq(%q, %k, %v, %dout, %0, %delta" + opt + ") " + attrs + " : " + q + "\n" +
           "%2 = attn_dkv(%q, %k, %v, %dout, %0, %delta" + opt + ") " + attrs + " : " + dt + "[2,2," + s + "," + std::to_string(d + 8) +
           "]\nreturn %0, %1, %2\n";
  };
  EXPECT_LE(check(parse_graph(graph("f32", "7", "70", 16, false, false)), 0, DType::f32), 1e-4);
  EXPECT_LE(check(parse_graph(graph("f32", "20", "90", 16, true, false)), 60, DType::f32), 1e-4);
  EXPECT_LE(check(parse_graph(graph("f64", "9", "33", 8, true, true)), 24, DType::f64), 1e-11);
  EXPECT_LE(check(parse_graph(graph("f32", "128", "128", 32, true, false)), 0, DType::f32), 1e-4);  // over the pool
  // A negative offset: queries 0-2 see no key (p 0 with zero_empty_rows).
  std::string empty = graph("f64", "12", "20", 8, true, false);
  for (size_t at; (at = empty.find("causal=true}")) != std::string::npos;) empty.replace(at, 12, "causal=true, zero_empty_rows=true}");
  EXPECT_LE(check(parse_graph(empty), -3, DType::f64), 1e-11);
  // Symbolic lengths, compiled once: T = 5 and 12 over S = 30.
  Graph sym = parse_graph(graph("f32", "T", "S", 16, true, false));
  for (int64_t t : {5, 12}) {
    RandomInputOptions so;
    so.fixed["pos"] = 30 - t;
    so.sizes["T"] = t, so.sizes["S"] = 30;
    Bindings b = random_inputs(sym, so);
    Difference diff = compare_outputs(tj::compile(sym, {}).run(b), interpret(sym, b, {DType::f32}));
    EXPECT_LE(diff.max_rel, 1e-4) << "T = " << t;
  }
}

// flash_attn with an added bias (as exported models mask padding): a bias
// broadcast over batch and heads, or over heads and queries, plus random
// values; every row's first block of 64 keys masked (-inf scores to start
// the online softmax), and one row with no visible key: NaN, or 0 with
// zero_empty_rows. Both paths: blocks of rows, and one query per KV head;
// f32, f64 and bf16 (16-bit operands read as floats).
// Operands whose views cannot be read as rows (a transposed K, a transposed
// bias) are copied first: by a launch of its own on a GPU, which must not
// take the attention's other buffers with it (review case).
TEST_F(Compiled, AttentionOperandsCopiedFirst) {
  Graph g = parse_graph(
      "graph g\ninput %q : f32[1,2,3,4]\ninput %kt : f32[1,2,4,5]\ninput %v : f32[1,2,5,4]\ninput %pos : i64[]\ninput %b : f32[1,1,5,3]\n"
      "%k = permute(%kt) {perm=[0, 1, 3, 2]} : f32[1,2,5,4]\n%bias = permute(%b) {perm=[0, 1, 3, 2]} : f32[1,1,3,5]\n"
      "%0 = flash_attn(%q, %k, %v, %pos, %bias) {scale=0.5, causal=true, bias=true} : f32[1,2,3,4]\nreturn %0\n");
  EXPECT_LE(check(g, 2, DType::f32), 1e-5);
}

TEST_F(Compiled, FlashAttentionWithABiasAndEmptyRows) {
  auto graph = [](const std::string& dt, int64_t b, int64_t t, int64_t kv, const std::string& rshape, int64_t empty, bool zero) {
    std::string T = std::to_string(t), B = std::to_string(b), KV = std::to_string(kv);
    std::string rs = rshape == "bt" ? "[1,1," + T + ",150]" : "[" + B + ",1,1,150]";
    std::string bs = rshape == "bt" ? rs : "[" + B + ",1," + T + ",150]";
    return "graph g\ninput %q : " + dt + "[" + B + ",4," + T + ",16]\ninput %k : " + dt + "[" + B + "," + KV + ",150,16]\n" +
           "input %v : " + dt + "[" + B + "," + KV + ",150,16]\ninput %r : " + dt + rs + "\n" +
           "%i0 = iota {n=" + T + "} : i64[" + T + "]\n%i = reshape(%i0) {shape=[" + T + ", 1]} : i64[" + T + ",1]\n" +
           "%j0 = iota {n=150} : i64[150]\n%j = reshape(%j0) {shape=[1, 150]} : i64[1,150]\n" +
           "%c70 = const {value=70} : i64[]\n%lim = add(%i, %c70) : i64[" + T + ",1]\n%a = lt(%j, %lim) : bool[" + T + ",150]\n" +
           "%ce = const {value=" + std::to_string(empty) + "} : i64[]\n%e = eq(%i, %ce) : bool[" + T + ",1]\n" +
           "%m = or(%a, %e) : bool[" + T + ",150]\n%ninf = const {value=-inf} : " + dt + "[]\n%zero = const {value=0.0} : " + dt +
           "[]\n%w = where(%m, %ninf, %zero) : " + dt + "[" + T + ",150]\n%w4 = reshape(%w) {shape=[1, 1, " + T + ", 150]} : " + dt +
           "[1,1," + T + ",150]\n%b = add(%w4, %r) : " + dt + bs + "\n%0 = flash_attn(%q, %k, %v, %b) {scale=0.25, bias=true" +
           (zero ? ", zero_empty_rows=true" : "") + "} : " + dt + "[" + B + ",4," + T + ",16]\nreturn %0\n";
  };
  struct Case {
    int64_t b, t, kv;
    const char* rshape;
    int64_t empty;
  };
  int checked = 0;
  for (const char* dt : {"f32", "f64", "bf16"})
    for (Case c : {Case{2, 37, 2, "bt", 5}, Case{2, 37, 2, "b", 5}, Case{1, 1, 4, "bt", -1}, Case{1, 1, 4, "b", 0}})
      for (bool zero : {false, true}) {
        DType d = *parse_dtype(dt);
        Graph g = parse_graph(graph(dt, c.b, c.t, c.kv, c.rshape, c.empty, zero));
        Bindings in = random_inputs(g, {});
        auto want = interpret(g, in, {d == DType::bf16 ? DType::f32 : d});
        auto got = tj::compile(g, {}).run(in);
        ASSERT_EQ(got[0].numel(), want[0].numel());
        SCOPED_TRACE(std::string(dt) + " T=" + std::to_string(c.t) + " r=" + c.rshape + (zero ? " zero" : " nan"));
        int64_t empty = 0;
        for (int64_t i = 0; i < want[0].numel(); ++i) {
          double w = want[0].get(i), x = got[0].get(i);
          if (std::isnan(w)) {
            EXPECT_TRUE(std::isnan(x)) << i;
            ++empty;
          } else {
            // bf16: read as floats, computed in float, rounded once (the interpreter: in f32, rounded once).
            double tol = d == DType::f32 ? 1e-5 : d == DType::f64 ? 1e-12 : 0x1p-7;
            EXPECT_NEAR(x, w, tol * std::max(1.0, std::abs(w))) << i;
          }
        }
        // The empty row (NaN, or 0 and finite everywhere).
        EXPECT_EQ(empty, zero || c.empty < 0 ? 0 : c.b * 4 * 16) << "NaN elements";
        if (zero && c.empty >= 0) {
          EXPECT_EQ(got[0].get(c.empty * 16), 0.0);
        }
        ++checked;
      }
  EXPECT_EQ(checked, 24);
}

// prod: a last-axis product fused into a rowwise kernel with its consumer,
// a product over the leading axis (a reduction kernel), and integer
// products that wrap as the interpreter's do.
TEST_F(Compiled, Products) {
  const char* floats =
      "graph g\ninput %x : f64[6,9]\n%0 = prod(%x) {axes=[1], keepdim=true} : f64[6,1]\n%1 = mul(%x, %0) : f64[6,9]\n"
      "%2 = prod(%x) {axes=[0]} : f64[9]\nreturn %1, %2\n";
  EXPECT_LE(check(parse_graph(floats), 0, DType::f64), 1e-12);
  EXPECT_LE(check(parse_graph(floats), 0, DType::f32), 1e-5);
  const char* ints =
      "graph g\ninput %x : i64[5,40]\n%0 = prod(%x) {axes=[1]} : i64[5]\n%1 = prod(%x) {axes=[0, 1]} : i64[]\n"
      "%c = cast(%x) {to=i32} : i32[5,40]\n%2 = prod(%c) {axes=[0]} : i32[40]\nreturn %0, %1, %2\n";
  Graph g = parse_graph(ints);
  Bindings in = random_inputs(g, {});
  auto want = interpret(g, in, {DType::f64});
  auto got = tj::compile(g, {}).run(in);
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].type_str(), want[o].type_str());
    EXPECT_EQ(std::memcmp(got[o].raw(), want[o].raw(), want[o].nbytes()), 0) << "output " << o;
  }
}

// f16 and bf16: stored in 16 bits, computed in float, each op's result
// rounded as the interpreter rounds it. Elementwise ops, casts (f64 to
// 16 bits rounded once) and generators give the interpreter's bits; the
// loop matmul, a softmax row and a sum within a few units of the last place.
TEST_F(Compiled, HalfPrecisionTypes) {
  for (const char* dt : {"f16", "bf16"}) {
    SCOPED_TRACE(dt);
    std::string D = dt;
    std::string text = "graph g\ninput %x : " + D + "[4,33]\ninput %w : " + D + "[33,8]\ninput %d : f64[4,33]\n" +
                       "%0 = mul(%x, %x) : " + D + "[4,33]\n%1 = add(%0, %x) : " + D + "[4,33]\n%2 = cast(%d) {to=" + D + "} : " + D +
                       "[4,33]\n%3 = sub(%1, %2) : " + D + "[4,33]\n%4 = matmul(%3, %w) : " + D + "[4,8]\n%5 = softmax(%4) {axis=1} : " + D +
                       "[4,8]\n%6 = sum(%3) {axes=[1]} : " + D + "[4]\n%7 = iota {n=300, dtype=" + D + "} : " + D + "[300]\n" +
                       "%8 = exp(%4) : " + D + "[4,8]\nreturn %3, %5, %6, %7, %8\n";
    Graph g = parse_graph(text);
    Bindings in = random_inputs(g, {});
    auto want = interpret(g, in, {DType::f32});
    Executable exe = tj::compile(g, {});
    EXPECT_TRUE(exe.stats().compiled);
    auto got = exe.run(in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < want.size(); ++o) {
      ASSERT_EQ(got[o].dtype(), g.type(g.outputs()[o]).dtype);  // the interpreter's are in its compute type
      ASSERT_EQ(got[o].numel(), want[o].numel());
      bool exact = o == 0 || o == 3;
      double ulp = std::string(dt) == "bf16" ? 0x1p-8 : 0x1p-11;
      for (int64_t i = 0; i < want[o].numel(); ++i) {
        double w = want[o].get(i), x = got[o].get(i);
        if (exact) EXPECT_EQ(x, w) << "output " << o << " element " << i;
        else EXPECT_NEAR(x, w, 4 * ulp * std::max(1.0, std::abs(w))) << "output " << o << " element " << i;
      }
    }
  }
}

// The 8- to 32-bit integers and u64, interpreted and compiled, to the same
// bits: wrapping arithmetic (u16 products beyond int's range), unsigned
// division and order, i8's -128 / -1, float to integer saturating, u64
// sums wrapping; ordering u64 is refused (u64 is held as int64 bits).
TEST_F(Compiled, NarrowAndUnsignedIntegers) {
  const char* text =
      "graph g\ninput %a : u8[4]\ninput %b : u8[4]\ninput %c : i8[4]\ninput %d : i8[4]\ninput %e : u16[4]\ninput %f : u32[4]\n"
      "input %x : f32[4]\ninput %u : u64[4]\n"
      "%0 = add(%a, %b) : u8[4]\n%1 = div(%a, %b) : u8[4]\n%2 = lt(%a, %b) : bool[4]\n%3 = div(%c, %d) : i8[4]\n"
      "%4 = mul(%e, %e) : u16[4]\n%5 = sub(%f, %f) : u32[4]\n%6 = cast(%x) {to=u8} : u8[4]\n%7 = cast(%x) {to=i16} : i16[4]\n"
      "%8 = add(%u, %u) : u64[4]\n%9 = cast(%a) {to=f32} : f32[4]\n%10 = max(%c, %d) : i8[4]\n%11 = sum(%f) {axes=[0]} : u32[]\n"
      "return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11\n";
  Graph g = parse_graph(text);
  EXPECT_EQ(print_graph(parse_graph(print_graph(g))), print_graph(g));
  Bindings in{{"a", NDArray::of<uint8_t>({4}, std::vector<uint8_t>{200, 255, 7, 130})},
              {"b", NDArray::of<uint8_t>({4}, std::vector<uint8_t>{3, 2, 9, 1})},
              {"c", NDArray::of<int8_t>({4}, std::vector<int8_t>{-128, 100, -7, 5})},
              {"d", NDArray::of<int8_t>({4}, std::vector<int8_t>{-1, -3, 2, 5})},
              {"e", NDArray::of<uint16_t>({4}, std::vector<uint16_t>{65535, 300, 2, 40000})},
              {"f", NDArray::of<uint32_t>({4}, std::vector<uint32_t>{4000000000u, 1, 2, 3})},
              {"x", NDArray::of<float>({4}, std::vector<float>{300.5f, -5.f, 7.9f, 1e9f})},
              {"u", NDArray::of<uint64_t>({4}, std::vector<uint64_t>{UINT64_MAX, 1ull << 63, 5, 0})}};
  auto want = interpret(g, in);
  auto got = tj::compile(g, {}).run(in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].type_str(), want[o].type_str()) << o;
    EXPECT_EQ(std::memcmp(got[o].raw(), want[o].raw(), want[o].nbytes()), 0) << "output " << o;
  }
  auto u8s = [](const NDArray& a) { return std::vector<int>(a.data<uint8_t>(), a.data<uint8_t>() + a.numel()); };
  EXPECT_EQ(u8s(want[0]), (std::vector<int>{203, 1, 16, 131}));
  EXPECT_EQ(u8s(want[1]), (std::vector<int>{66, 127, 0, 130}));
  EXPECT_EQ(u8s(want[2]), (std::vector<int>{0, 0, 1, 0}));
  EXPECT_EQ(want[3].data<int8_t>()[0], -128);
  EXPECT_EQ(want[3].data<int8_t>()[1], -33);
  EXPECT_EQ(want[4].data<uint16_t>()[0], 1);  // 65535^2 mod 2^16
  EXPECT_EQ(u8s(want[6]), (std::vector<int>{255, 0, 7, 255}));
  EXPECT_EQ(want[7].data<int16_t>()[3], 32767);
  EXPECT_EQ(want[8].data<uint64_t>()[0], UINT64_MAX - 1);
  EXPECT_EQ(want[8].data<uint64_t>()[1], 0u);
  EXPECT_EQ(want[9].data<float>()[0], 200.f);
  EXPECT_EQ(want[11].data<uint32_t>()[0], 4000000006u);
  try {
    parse_graph("graph g\ninput %u : u64[2]\n%0 = lt(%u, %u) : bool[2]\nreturn %0\n");
    ADD_FAILURE() << "u64 ordering accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("u64 operands are not supported"), std::string::npos) << e.what();
  }
}

// A kernel with two results: where(m, 0, 1) is planned in place of the
// exp (dead after this kernel), which the mul reads after it. Found by the
// ONNX conformance suite (the expanded NegativeLogLikelihoodLoss): storing
// the where before the mul had read the element gave a wrong sum.
TEST_F(Compiled, AResultInPlaceOfAnInputIsStoredAfterEveryRead) {
  const char* text =
      "graph g\ninput %x : f64[3,1,2]\ninput %m : bool[3,2]\n%0 = exp(%x) : f64[3,1,2]\n%1 = squeeze(%0) {axes=[1]} : f64[3,2]\n"
      "%c0 = const {value=0.0} : f64[1]\n%c1 = const {value=1.0} : f64[1]\n%2 = where(%m, %c0, %c1) : f64[3,2]\n"
      "%3 = mul(%1, %2) : f64[3,2]\n%4 = sum(%3) {axes=[0, 1]} : f64[]\n%5 = sum(%2) {axes=[0, 1]} : f64[]\nreturn %4, %5\n";
  Graph g = parse_graph(text);
  ASSERT_GE(plan_activations(g, fuse(g)).in_place, 1);
  EXPECT_LE(check(g, 0, DType::f64), 1e-12);
}

// Concats along the last axis whose inputs are contiguous rows: one pass
// over the rows, the inputs' runs one after another (from a table where
// they are many), the elementwise ops after the concat computed from each
// element as it is read (densenet's batch norms), the concat stored only
// where it is wanted; bit for bit the interpreter's. Inputs computed in the
// kernel, read as views (a slice of whole rows streams, a slice of channels
// does not), a concat that is also a result, one read through a view by
// the ops after it, one read after the pass (a gather's indices, a
// scatter_add's base, directly and through an op of the pass), integers,
// and symbolic rows.
TEST_F(Compiled, ConcatsStreamTheirRowsIntoTheOpsAfter) {
  struct Case {
    const char* text;
    int streams;  // the pass is in the source (1) or not (0); -1: either
  };
  const Case cases[] = {
      {"graph g\ninput %a : f32[1,5,6,3]\ninput %b : f32[1,5,6,4]\nparam %m : f32[7]\nparam %s : f32[7]\n"
       "%0 = concat(%a, %b) {axis=3} : f32[1,5,6,7]\n%1 = sub(%0, %m) : f32[1,5,6,7]\n%2 = mul(%1, %s) : f32[1,5,6,7]\n"
       "%3 = relu(%2) : f32[1,5,6,7]\nreturn %3\n",
       1},
      {"graph g\ninput %a : f32[4,3]\ninput %b : f32[4,5]\ninput %c : f32[4,1]\n%0 = abs(%a) : f32[4,3]\n%1 = neg(%b) : f32[4,5]\n"
       "%2 = concat(%0, %1, %c) {axis=1} : f32[4,9]\n%3 = mul(%2, %2) : f32[4,9]\nreturn %3, %2, %0\n",
       1},
      {"graph g\ninput %a : f32[6,3]\ninput %b : f32[2,2]\n%0 = slice(%a) {axis=0, start=2, end=4} : f32[2,3]\n"
       "%1 = concat(%0, %b) {axis=1} : f32[2,5]\n%2 = neg(%1) : f32[2,5]\nreturn %2\n",
       1},
      {"graph g\ninput %a : f32[2,6]\ninput %b : f32[2,2]\n%0 = slice(%a) {axis=1, start=1, end=4} : f32[2,3]\n"
       "%1 = concat(%0, %b) {axis=1} : f32[2,5]\n%2 = neg(%1) : f32[2,5]\nreturn %2\n",
       0},
      {"graph g\ninput %a : f32[3,2]\ninput %b : f32[3,1]\n%0 = concat(%a, %b) {axis=1} : f32[3,3]\n"
       "%1 = permute(%0) {perm=[1, 0]} : f32[3,3]\n%2 = add(%0, %1) : f32[3,3]\nreturn %2\n",
       1},
      // More inputs than get a loop each: a table of their runs.
      {"graph g\ninput %a : f32[2,3,2]\ninput %b : f32[2,3,1]\n%0 = neg(%a) : f32[2,3,2]\n"
       "%1 = concat(%a, %b, %0, %b, %a, %0) {axis=2} : f32[2,3,10]\nparam %m : f32[10]\n%2 = mul(%1, %m) : f32[2,3,10]\n"
       "%3 = max(%2, %1) : f32[2,3,10]\nreturn %3\n",
       1},
      // Read after the pass: by a gather (as indices) and by a store.
      {"graph g\ninput %a : i64[2,3]\ninput %b : i64[2,2]\ninput %t : f32[10]\n%0 = concat(%a, %b) {axis=1} : i64[2,5]\n"
       "%1 = gather(%t, %0) : f32[2,5]\nreturn %1\n",
       -1},
      {"graph g\ninput %a : f32[2,3]\ninput %b : f32[2,2]\ninput %i : i64[3]\ninput %u : f32[3,5]\n%0 = concat(%a, %b) {axis=1} : f32[2,5]\n"
       "%1 = scatter_add(%0, %i, %u) : f32[2,5]\nreturn %1\n",
       -1},
      {"graph g\ninput %a : f32[2,3]\ninput %b : f32[2,2]\ninput %i : i64[3]\ninput %u : f32[3,5]\n%0 = concat(%a, %b) {axis=1} : f32[2,5]\n"
       "%1 = neg(%0) : f32[2,5]\n%2 = scatter_add(%1, %i, %u) : f32[2,5]\nreturn %2\n",
       -1},
      // An output written in place of an input that a store's operand
      // (not in memory) was computed from: the store must not recompute it.
      {"graph g\ninput %y : f32[3,2,5]\ninput %a : f32[2,3]\ninput %b : f32[2,2]\ninput %i : i64[3]\ninput %u : f32[3,5]\n"
       "%0 = sum(%y) {axes=[0]} : f32[2,5]\n%1 = concat(%a, %b) {axis=1} : f32[2,5]\n%2 = add(%1, %0) : f32[2,5]\n"
       "%3 = sub(%0, %1) : f32[2,5]\n%4 = scatter_add(%2, %i, %u) : f32[2,5]\nreturn %4, %3\n",
       -1},
      {"graph g\ninput %y : f32[3,2,5]\ninput %a : f32[2,5]\ninput %i : i64[3]\ninput %u : f32[3,5]\n"
       "%0 = sum(%y) {axes=[0]} : f32[2,5]\n%1 = neg(%a) : f32[2,5]\n%2 = add(%1, %0) : f32[2,5]\n"
       "%3 = sub(%0, %1) : f32[2,5]\n%4 = scatter_add(%2, %i, %u) : f32[2,5]\nreturn %4, %3\n",
       -1},
      {"graph g\ninput %a : i64[2,3,2]\ninput %b : i64[2,3,3]\n%0 = concat(%a, %b) {axis=2} : i64[2,3,5]\n"
       "%1 = add(%0, %0) : i64[2,3,5]\nreturn %1\n",
       1},
  };
  for (const Case& c : cases) {
    Graph g = parse_graph(c.text);
    Bindings in = random_inputs(g, 3), params, inputs;
    split(g, in, &params, &inputs);
    Executable exe = tj::compile(g, params);
    ASSERT_TRUE(exe.stats().compiled) << c.text;
    if (testing_on_cpu() && c.streams >= 0) {
      EXPECT_EQ(exe.source().find("(tj_at+tj_c)") != std::string::npos, c.streams == 1) << c.text;
    }
    EXPECT_EQ(compare_outputs(exe.run(inputs), interpret(g, in, {DType::f32})).max_abs, 0) << c.text;
  }
  Graph sym = parse_graph(
      "graph g\ninput %a : f32[B,2,3]\ninput %b : f32[B,2,5]\n%0 = concat(%a, %b) {axis=2} : f32[B,2,8]\n"
      "%1 = mul(%0, %0) : f32[B,2,8]\nreturn %1\n");
  Executable exe = tj::compile(sym, {});
  for (int64_t b : {1, 3000, 2}) {  // 3000: a pass split over the pool
    RandomInputOptions ro;
    ro.sizes = {{"B", b}};
    Bindings in = random_inputs(sym, ro);
    EXPECT_EQ(compare_outputs(exe.run(in), interpret(sym, in, {DType::f32})).max_abs, 0) << "B = " << b;
  }
}

// Reshapes of strided views (slices of a wider buffer, permuted buffers)
// read in place where the layout allows and through index arithmetic where
// it does not; both give the interpreter's values.
TEST_F(Compiled, ReshapesOfStridedViews) {
  const char* cases[] = {
      // [2,3,12] sliced to [2,3,8], split into [2,3,2,4] heads: strided.
      "graph g\ninput %x : f64[2,3,12]\n%0 = slice(%x) {axis=2, start=4, end=12} : f64[2,3,8]\n"
      "%1 = reshape(%0) {shape=[2, 3, 2, 4]} : f64[2,3,2,4]\n%2 = permute(%1) {perm=[0, 2, 1, 3]} : f64[2,2,3,4]\n"
      "%3 = exp(%2) : f64[2,2,3,4]\nreturn %3\n",
      // Merging dims across a slice: not contiguous, so index arithmetic.
      "graph g\ninput %x : f64[4,6]\n%0 = slice(%x) {axis=1, start=1, end=5} : f64[4,4]\n"
      "%1 = reshape(%0) {shape=[16]} : f64[16]\n%2 = neg(%1) : f64[16]\nreturn %2\n",
      // Size-1 dims inside a group, and a permuted buffer split again.
      "graph g\ninput %x : f64[3,1,8]\n%0 = permute(%x) {perm=[2, 1, 0]} : f64[8,1,3]\n"
      "%1 = reshape(%0) {shape=[2, 4, 3]} : f64[2,4,3]\n%2 = exp(%1) : f64[2,4,3]\nreturn %2\n",
      "graph g\ninput %x : f64[4,1,2,6]\n%0 = slice(%x) {axis=3, start=0, end=4} : f64[4,1,2,4]\n"
      "%1 = reshape(%0) {shape=[4, 8]} : f64[4,8]\n%2 = exp(%1) : f64[4,8]\nreturn %2\n",
      // Groups: an exported attention's heads merged back ([2,3,4,5] permuted,
      // read as [2,3,20]), a split and a merge in one reshape, size-1 dims
      // on both sides; each group maps alone.
      "graph g\ninput %x : f64[2,4,3,5]\n%0 = permute(%x) {perm=[0, 2, 1, 3]} : f64[2,3,4,5]\n"
      "%1 = reshape(%0) {shape=[2, 3, 20]} : f64[2,3,20]\n%2 = exp(%1) : f64[2,3,20]\nreturn %2\n",
      "graph g\ninput %x : f64[6,4,5]\n%0 = permute(%x) {perm=[1, 0, 2]} : f64[4,6,5]\n"
      "%1 = reshape(%0) {shape=[2, 2, 1, 2, 15, 1]} : f64[2,2,1,2,15,1]\n%2 = exp(%1) : f64[2,2,1,2,15,1]\nreturn %2\n",
  };
  for (const char* text : cases) EXPECT_LE(check(parse_graph(text), 0, DType::f64), 1e-12) << text;
  // The same over symbolic sizes: B and S stay groups of their own, only
  // the merged heads divide (by constants).
  Graph sym = parse_graph(
      "graph g\ninput %x : f64[B,4,S,5]\n%0 = permute(%x) {perm=[0, 2, 1, 3]} : f64[B,S,4,5]\n"
      "%1 = reshape(%0) {shape=[B, S, 20]} : f64[B,S,20]\n%2 = exp(%1) : f64[B,S,20]\nreturn %2\n");
  Executable exe = tj::compile(sym, {});
  if (testing_on_cpu()) {
    EXPECT_EQ(exe.source().find("tj_sym_S))%"), std::string::npos) << "a division by a symbolic size";
  }
  for (int64_t s : {1, 7}) {
    RandomInputOptions ro;
    ro.sizes = {{"B", 2}, {"S", s}};
    Bindings in = random_inputs(sym, ro);
    EXPECT_LE(compare_outputs(exe.run(in), interpret(sym, in, {DType::f64})).max_rel, 1e-12) << "S = " << s;
  }
}

// A decode-sized program: its small GEMVs split over the thread pool, by
// columns (some parts with no columns at all), row-major and transposed (an
// input, not frozen) weights, with epilogues; the other kernels on one thread.
TEST_F(Compiled, SmallProgramSplitsItsGemvs) {
  TJ_CPU_ONLY("the thread pool's team");
  for (const char* t : {"f64", "f32"}) {
    std::string ty(t);
    std::string text = "graph g\ninput %x : " + ty + "[1,512]\nparam %a : " + ty + "[512,12]\nparam %b : " + ty +
                       "[512,344]\ninput %c : " + ty + "[512,344]\nparam %d : " + ty + "[512,8]\n" +
                       "%0 = matmul(%x, %a) : " + ty + "[1,12]\n%1 = matmul(%x, %b) : " + ty + "[1,344]\n%2 = silu(%1) : " + ty +
                       "[1,344]\n%3 = permute(%c) {perm=[1, 0]} : " + ty + "[344,512]\n%4 = exp(%x) : " + ty +
                       "[1,512]\n%5 = matmul(%2, %3) : " + ty + "[1,512]\n%6 = add(%5, %x) : " + ty + "[1,512]\n" +
                       "%7 = matmul(%6, %d) : " + ty + "[1,8]\nreturn %0, %4, %6, %7\n";
    Graph g = parse_graph(text);
    DType dt = ty == "f64" ? DType::f64 : DType::f32;
    EXPECT_LE(check(g, 0, dt), dt == DType::f64 ? 1e-12 : 1e-5);
    Bindings all = random_inputs(g, 1), params, inputs;
    split(g, all, &params, &inputs);
    std::string src = tj::compile(g, params).source();
    EXPECT_NE(src.find("static const bool tj_team = true;"), std::string::npos);
    EXPECT_NE(src.find(ty == "f32" ? "for (int64_t n = n0; n < n1; n += 4)" : "for (int64_t n = n0; n < n1; ++n)"), std::string::npos)
        << "no transposed GEMV split over the pool";
  }
}

// A one-row product by a transposed matrix (here an input's view; frozen
// weights are mostly transposed when compiled, but not vgg11's 411 MB
// classifier): four rows a pass as 16-lane sums, with rows and k left over,
// on one thread and split over the pool. Against the interpreter in f64,
// and bit for bit the same on 1 and 3 threads.
TEST_F(Compiled, TransposedGemvMatchesTheInterpreter) {
  TJ_CPU_ONLY("the C++ GEMV");
  for (auto [K, N] : {std::pair<int, int>{37, 7}, {16, 4}, {1000, 1027}}) {
    const std::string k = std::to_string(K), n = std::to_string(N);
    Graph g = parse_graph("graph g\ninput %x : f32[1," + k + "]\ninput %w : f32[" + n + "," + k + "]\n%0 = permute(%w) {perm=[1, 0]} : f32[" + k +
                          "," + n + "]\n%1 = matmul(%x, %0) : f32[1," + n + "]\nreturn %1\n");
    Bindings in = random_inputs(g, 1);
    auto want = interpret(g, in, {DType::f64});
    std::vector<std::vector<NDArray>> got;
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      CompileOptions co;
      co.pool = &pool;
      Executable exe = tj::compile(g, {}, co);
      EXPECT_NE(exe.source().find("tj_vfn s[4][tj_per16] = {};"), std::string::npos) << "not the four-row GEMV, K " << K;
      Bindings copy = in;
      got.push_back(exe.run(copy));
    }
    EXPECT_LE(compare_outputs(got[0], want).max_rel, 1e-5) << "K " << K << ", N " << N;
    ASSERT_EQ(got[1][0].nbytes(), got[0][0].nbytes());
    EXPECT_EQ(std::memcmp(got[1][0].raw(), got[0][0].raw(), got[0][0].nbytes()), 0) << "K " << K << ": 1 thread and 3 differ";
  }
}

// Each part of a split loop (a kernel's, an output copy's) declares the
// pointers as its own locals rather than reading them through the lambda's
// closure, which GCC vectorized as gathers inside `omp simd` reductions (a
// layer norm's rows).
TEST_F(Compiled, PartsDeclareTheKernelsPointers) {
  TJ_CPU_ONLY("the C++ emitter's parts");
  Graph g = parse_graph(
      "graph g\ninput %x : f32[512,96]\nparam %w : f32[96]\nparam %b : f32[96]\n"
      "%0 = layer_norm(%x, %w, %b) {eps=1e-06} : f32[512,96]\nreturn %0\n");
  EXPECT_LE(check(g, 0, DType::f32), 1e-5);
  Bindings all = random_inputs(g, 1), params, inputs;
  split(g, all, &params, &inputs);
  const std::string src = tj::compile(g, params).source();
  const std::string part = "[&](int64_t tj_part, int64_t tj_parts, int tj_thread) {\n";
  ASSERT_NE(src.find(part), std::string::npos) << "no part split over the pool";
  for (size_t at = src.find(part); at != std::string::npos; at = src.find(part, at + 1))
    EXPECT_EQ(src.compare(at + part.size(), 16, "  float* const p"), 0) << src.substr(at, 200);
}

// Bit for bit the same results on 1, 2 and more threads than cores: no
// kernel's rounding depends on how its work is split. Every split kind: a
// large matmul over column blocks, a rowwise and a pointwise loop in parts,
// a large GEMV summing partials, attention over (head, query) pairs, and the
// small GEMVs and attention of a decode step.
TEST_F(Compiled, ResultsDoNotDependOnTheThreadCount) {
  const auto& c = models::llama_config("tiny");
  std::vector<Graph> graphs = {
      parse_graph("graph g\ninput %x : f32[64,512]\nparam %w : f32[512,1024]\ninput %v : f32[1,1024]\nparam %u : f32[1024,512]\n"
                  "input %q : f32[1,4,64,32]\ninput %k : f32[1,4,64,32]\ninput %vv : f32[1,4,64,32]\ninput %y : f32[1,64,1024]\n"
                  "%0 = matmul(%x, %w) : f32[64,1024]\n%1 = softmax(%0) {axis=-1} : f32[64,1024]\n"
                  "%2 = matmul(%v, %u) : f32[1,512]\n%3 = exp(%2) : f32[1,512]\n"
                  "%4 = flash_attn(%q, %k, %vv) {scale=0.125} : f32[1,4,64,32]\n%5 = mul(%x, %x) : f32[64,512]\n"
                  "%6 = exp(%y) : f32[1,64,1024]\n"  // split over its 64 rows
                  "return %1, %3, %4, %5, %6\n"),
      models::trace_llama_layer(c, {1, 1, 64, DType::f32}), models::trace_llama_layer(c, {1, 16, 16, DType::f32})};
  for (const Graph& g : graphs) {
    RandomInputOptions ro;
    ro.fixed["pos"] = 0;
    Bindings all = random_inputs(g, ro), params, inputs;
    split(g, all, &params, &inputs);
    std::vector<std::vector<NDArray>> results;
    for (int threads : {1, 2, 5}) {
      ThreadPool pool(threads);
      CompileOptions co;
      co.pool = &pool;
      Executable exe = tj::compile(g, params, co);
      // A decode step's small kernels split over the pool and not: the same bits.
      for (int split : {0, 1}) {
        Bindings in = inputs;  // a deep copy: donated caches are written in place
        RunOptions ro;
        ro.split_small_kernels = split;
        results.emplace_back();
        exe.run(in, results.back(), ro);
      }
    }
    for (size_t r = 1; r < results.size(); ++r)
      for (size_t i = 0; i < results[0].size(); ++i) {
        ASSERT_EQ(results[r][i].nbytes(), results[0][i].nbytes());
        EXPECT_EQ(std::memcmp(results[r][i].raw(), results[0][i].raw(), results[0][i].nbytes()), 0)
            << g.name() << " output " << i << " differs between 1 thread and run " << r << " (threads 1, 1, 2, 2, 5, 5; small kernels alone, split)";
      }
  }
}

// int8 weights that only one-row products read are packed in blocks of 16
// columns ([N/16, K, 16]) and the GEMV reads each block as one stream: on
// one thread, as a team, and split over the pool (K not a multiple of 4
// included); the same bits at any thread count, and the interpreter's
// values on the converted weights. A product of 3 rows keeps row-major.
Graph packed_gemvs() {
  return parse_graph(
      "graph g\ninput %a : f32[1,131]\nparam %wa : f32[131,48]\ninput %b : f32[1,1,1027]\nparam %wb : f32[1027,512]\n"
      "input %c : f32[1,64]\nparam %wc : f32[64,80]\ninput %d : f32[3,64]\nparam %wd : f32[64,64]\n"
      "%0 = matmul(%a, %wa) : f32[1,48]\n%1 = relu(%0) : f32[1,48]\n%2 = matmul(%b, %wb) : f32[1,1,512]\n"
      "%3 = matmul(%c, %wc) : f32[1,80]\n%4 = matmul(%d, %wd) : f32[3,64]\nreturn %1, %2, %3, %4\n");
}

TEST_F(Compiled, PackedInt8Gemv) {
  Graph g = packed_gemvs();
  Bindings all = random_inputs(g, 7), params, inputs;
  split(g, all, &params, &inputs);
  Bindings f32_in = inputs;
  std::vector<NDArray> f32 = tj::compile(g, params).run(f32_in);
  std::vector<std::vector<NDArray>> results;
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    CompileOptions co;
    co.pool = &pool;
    co.weights = DType::i8;
    Executable exe = tj::compile(g, params, co);
    int packed = 0, row_major = 0;
    for (const Node& n : exe.optimized().nodes()) {
      packed += n.op == Op::permute && exe.optimized().type(n.inputs[0]).dtype == DType::i8;
      row_major += n.op == Op::cast && exe.optimized().type(n.inputs[0]).dtype == DType::i8 && exe.optimized().node(n.inputs[0]).op != Op::reshape;
    }
    EXPECT_EQ(packed, 3);
    EXPECT_EQ(row_major, 1);
    for (int split : {0, 1}) {
      Bindings in = inputs;
      RunOptions ro;
      ro.split_small_kernels = split;
      results.emplace_back();
      exe.run(in, results.back(), ro);
    }
    Bindings ref = exe.held_params();
    for (const auto& [k, v] : inputs) ref[k] = v;
    EXPECT_LE(compare_outputs(results.back(), interpret(exe.optimized(), ref, {DType::f32})).max_rel, 1e-5) << threads << " threads";
    EXPECT_LE(compare_outputs(results.back(), f32).max_rel, 5e-2);
  }
  for (size_t r = 1; r < results.size(); ++r)
    for (size_t i = 0; i < results[0].size(); ++i)
      EXPECT_EQ(std::memcmp(results[r][i].raw(), results[0][i].raw(), results[0][i].nbytes()), 0) << "output " << i << ", run " << r;
}

// The packed GEMV's code for CPUs without AVX-512 (8 columns at a time with
// AVX2) and without either (plain loops): a compiler wrapper that turns them
// off, each against the interpreter.
TEST_F(Compiled, PackedInt8GemvWithoutAvx512) {
  TJ_CPU_ONLY("the generated C++ for other instruction sets");
  Graph g = packed_gemvs();
  Bindings all = random_inputs(g, 7), params, inputs;
  split(g, all, &params, &inputs);
  const std::string cxx = find_compiler().value().executable;
  for (const std::string flags : {"-mno-avx512f", "-mno-avx512f -mno-avx2"}) {
    SCOPED_TRACE(flags);
    const std::string wrapper = testing::scratch_dir("compiled") + "/cxx_" + std::to_string(flags.size());
    std::ofstream(wrapper) << "#!/bin/sh\nexec '" << cxx << "' \"$@\" " << flags << "\n";
    std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
    setenv("TJ_CXX", wrapper.c_str(), 1);
    CompileOptions co;
    co.weights = DType::i8;
    Executable exe = tj::compile(g, params, co);
    unsetenv("TJ_CXX");
    EXPECT_TRUE(exe.stats().compiled);
    Bindings in = inputs, ref = exe.held_params();
    for (const auto& [k, v] : inputs) ref[k] = v;
    EXPECT_LE(compare_outputs(exe.run(in), interpret(exe.optimized(), ref, {DType::f32})).max_rel, 1e-5);
    std::filesystem::remove(wrapper);
  }
}

// Donated caches: updated in the input arrays; copied out as outputs too
// unless the call says not to, and then those outputs are left untouched.
TEST_F(Compiled, DonatedCachesNeedNotBeCopiedOut) {
  const auto& c = models::llama_config("tiny");
  Graph g = models::trace_llama_layer(c, {1, 1, 8, DType::f32});
  RandomInputOptions ro;
  ro.seed = 3;
  ro.fixed["pos"] = 5;
  Bindings all = random_inputs(g, ro), params, inputs;
  auto want = interpret(g, all, {DType::f32});
  split(g, all, &params, &inputs);
  Executable exe = tj::compile(g, params);
  std::vector<NDArray> out;
  RunOptions ro2;
  ro2.copy_donated_outputs = false;
  exe.run(inputs, out, ro2);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_LE(compare_outputs({out[0]}, {want[0]}).max_rel, 1e-5);
  EXPECT_LE(compare_outputs({inputs.at("k_cache"), inputs.at("v_cache")}, {want[1], want[2]}).max_rel, 1e-5);
  for (size_t i = 1; i < 3; ++i) EXPECT_EQ(out[i].raw(), nullptr) << "a donated output was made";
  // The aliases as data: outputs 1 and 2 are the arrays of inputs k_cache and v_cache.
  const auto& aliases = exe.output_aliases();
  ASSERT_EQ(aliases.size(), 3u);
  EXPECT_EQ(aliases[0], -1);
  const auto ins = exe.optimized().inputs();
  ASSERT_GE(aliases[1], 0);
  ASSERT_GE(aliases[2], 0);
  EXPECT_EQ(exe.optimized().node(ins[static_cast<size_t>(aliases[1])]).name, "k_cache");
  EXPECT_EQ(exe.optimized().node(ins[static_cast<size_t>(aliases[2])]).name, "v_cache");
}

// One compilation for every size: the tiny layer with its KV length S and
// token count T symbolic, run at several sizes against static compilations.
TEST_F(Compiled, SymbolicSizesMatchStaticCompilations) {
  const auto& c = models::llama_config("tiny");
  for (bool decode : {true, false}) {
    Dim T = decode ? Dim(1) : Dim::symbol("T");
    Graph sym = models::trace_llama_layer(c, {1, T, Dim::symbol("S"), DType::f32});
    Bindings params;
    {
      Graph concrete = models::trace_llama_layer(c, {1, decode ? 1 : 2, 8, DType::f32});
      Bindings all = random_inputs(concrete, 5), inputs;
      split(concrete, all, &params, &inputs);
    }
    Executable exe = tj::compile(sym, params);
    ASSERT_TRUE(exe.stats().compiled);
    EXPECT_NE(exe.source().find("tj_sym_S"), std::string::npos);
    // Sizes seen before come back (a device keeps a layout per size, its
    // recorded launches replayed with that layout's arguments).
    for (int64_t S : {2, 7, 64, 500, 7, 2}) {
      int64_t tokens = decode ? 1 : std::min<int64_t>(S, 5);
      Graph fixed = models::trace_llama_layer(c, {1, tokens, S, DType::f32});
      RandomInputOptions ro;
      ro.seed = static_cast<uint64_t>(S);
      ro.fixed["pos"] = static_cast<double>(S - tokens);
      Bindings all = random_inputs(fixed, ro), p, inputs;
      split(fixed, all, &p, &inputs);
      for (auto& [k, v] : params) all[k] = v;
      Bindings in2 = inputs;
      auto got = exe.run(inputs);
      auto want = tj::compile(fixed, params).run(in2);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_LE(compare_outputs({got[i]}, {want[i]}).max_rel, 1e-6) << (decode ? "decode" : "prefill") << " S=" << S << " output " << i;
    }
  }
}

// A size that shrinks as its symbol grows (review case): memory laid out at
// rounded-up sizes would not hold it.
TEST_F(Compiled, SymbolicSizesThatShrink) {
  Graph g = parse_graph(
      "graph g\ninput %x : f32[1000]\ninput %y : f32[S]\n%0 = slice(%x) {axis=0, start=S, end=1000} : f32[-S+1000]\n"
      "%1 = exp(%0) : f32[-S+1000]\n%2 = exp(%y) : f32[S]\nreturn %1, %2\n");
  Executable exe = tj::compile(g, {});
  for (int64_t S : {5, 257, 600, 3, 900}) {
    Bindings in{{"x", NDArray(DType::f32, {1000})}, {"y", NDArray(DType::f32, {S})}};
    for (int64_t i = 0; i < 1000; ++i) in["x"].set(i, 0.001 * static_cast<double>(i));
    auto want = interpret(g, in, {DType::f32});
    auto got = exe.run(in);
    EXPECT_LE(compare_outputs(got, want).max_rel, 1e-6) << "S=" << S;
  }
}

TEST_F(Compiled, BadInputsAreReported) {
  const auto& c = models::llama_config("tiny");
  Graph g = models::trace_llama_layer(c, {1, 1, 8, DType::f32});
  Bindings all = random_inputs(g, 1), params, inputs;
  split(g, all, &params, &inputs);
  Executable exe = tj::compile(g, params);
  Bindings wrong = inputs;
  wrong["x"] = NDArray(DType::f32, {1, 2, 128});
  EXPECT_THROW(exe.run(wrong), Error);
  wrong = inputs;
  wrong["x"] = NDArray(DType::f64, {1, 1, 128});
  EXPECT_THROW(exe.run(wrong), Error);
  wrong = inputs;
  wrong.erase("pos");
  EXPECT_THROW(exe.run(wrong), Error);
  wrong = inputs;
  wrong["pos"] = NDArray::scalar(DType::i64, 8);  // past the cache
  try {
    exe.run(wrong);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kv_write position"), std::string::npos);
  }
  wrong = inputs;
  wrong["pos"] = NDArray();  // no data at all: an error, not a read of null
  EXPECT_THROW(exe.run(wrong), Error);
  Bindings missing_param = params;
  missing_param.erase("wq");
  EXPECT_THROW(tj::compile(g, missing_param), Error);
}

TEST_F(Compiled, NoCompilerFallsBackToTheInterpreter) {
  TJ_CPU_ONLY("a device needs no C++ compiler");
  const auto& c = models::llama_config("tiny");
  Graph g = models::trace_mlp(c, {1, 3, 3, DType::f32});
  Bindings all = random_inputs(g, 2), params, inputs;
  split(g, all, &params, &inputs);
  setenv("TJ_CXX", "/nonexistent/c++", 1);
  Executable exe = tj::compile(g, params);
  unsetenv("TJ_CXX");
  EXPECT_FALSE(exe.stats().compiled);
  auto got = exe.run(inputs);
  EXPECT_LE(compare_outputs(got, interpret(g, all, {DType::f32})).max_rel, 1e-6);
}

}  // namespace
}  // namespace tj
