// Passes on the real models, differential-tested against the interpreter in
// f64: each pass alone, and the whole pipeline; attention matching and norm
// folding on the Llama layer; the pass order that matters.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "ir/rewriter.h"
#include "ir/text.h"
#include "models/llama.h"
#include "passes/pipeline.h"
#include "reference/random_inputs.h"

namespace tj {
namespace {

const models::LlamaConfig& tiny() { return models::llama_config("tiny"); }

struct Model {
  std::string name;
  Graph graph;
  double pos;
};

std::vector<Model> models_that_fit() {
  const auto& c = tiny();
  std::vector<Model> m;
  m.push_back({"mlp", models::trace_mlp(c, {1, 6, 6, DType::f64}), 0});
  m.push_back({"layer prefill", models::trace_llama_layer(c, {1, 7, 7, DType::f64}), 0});
  m.push_back({"layer prefill at 3", models::trace_llama_layer(c, {2, 5, 12, DType::f64}), 3});
  m.push_back({"layer decode", models::trace_llama_layer(c, {1, 1, 16, DType::f64}), 9});
  m.push_back({"llama prefill", models::trace_llama(c, {1, 6, 8, DType::f64}, 2), 0});
  m.push_back({"llama decode", models::trace_llama(c, {1, 1, 8, DType::f64}, 2), 6});
  return m;
}

Bindings inputs_for(const Graph& g, double pos) {
  RandomInputOptions ro;
  ro.seed = 3;
  if (g.find("pos") >= 0) ro.fixed["pos"] = pos;
  return random_inputs(g, ro);
}

std::vector<PassRecord> run(Graph& g, const std::vector<std::string>& passes, const Bindings& in, bool freeze) {
  PipelineOptions o;
  o.differential = true;
  o.inputs = &in;
  if (freeze) o.pass.freeze_values = &in;
  return run_pipeline(g, passes, o);
}

// The pass log (TJ_LOG=passes, tjc opt --log) over frozen weights: each
// weight a one-line summary, never its data.
TEST(ModelPasses, LogSummarizesFrozenWeights) {
  const auto& c = models::llama_config("tiny");
  Graph g = models::trace_llama_layer(c, {1, 4, 4, DType::f32});
  Bindings in = inputs_for(g, 0);
  PipelineOptions o;
  o.log = true;
  o.pass.freeze_values = &in;
  ::testing::internal::CaptureStderr();
  run_pipeline(g, default_pipeline(true), o);
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find(" values, xxh3 "), std::string::npos);
  int64_t weight_bytes = 0;
  for (const auto& [k, v] : in) weight_bytes += static_cast<int64_t>(v.nbytes());
  EXPECT_LT(static_cast<int64_t>(log.size()), weight_bytes / 10) << "the log holds the weights";
}

int count_op(const Graph& g, Op op);

// Frozen weights are held in their own dtype through every pass: an f32
// weight takes 4 bytes per value, a bf16 one 2, never an 8-byte double.
TEST(ModelPasses, FrozenWeightsKeepTheirDtype) {
  for (DType t : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(t));
    Graph g = models::trace_llama_layer(tiny(), {1, 4, 4, t});
    Bindings in = inputs_for(g, 0);
    PipelineOptions o;
    o.pass.freeze_values = &in;
    run_pipeline(g, default_pipeline(true), o);
    int64_t constant_bytes = 0, weight_bytes = 0;
    for (const Node& n : g.nodes()) {
      if (n.op != Op::constant) continue;
      const ConstValues& d = *n.const_data();
      EXPECT_EQ(d.dtype(), n.type.dtype);
      EXPECT_EQ(d.nbytes(), d.size() * static_cast<size_t>(dtype_size(n.type.dtype)));
      if (d.size() > 1) constant_bytes += static_cast<int64_t>(d.nbytes());
    }
    for (ValueId p : g.params()) weight_bytes += static_cast<int64_t>(in.at(g.node(p).name).nbytes());
    EXPECT_GT(constant_bytes, weight_bytes / 2);  // the weights are there (folded ones included)...
    EXPECT_LE(constant_bytes, weight_bytes);      // ...and no larger than as given
  }
}

// With frozen weights the layer's seven projections become four products:
// [Wq|Wk|Wv], Wo, [W_gate|W_up], W_down, bit-identical in the interpreter.
TEST(ModelPasses, ProjectionsMergeIntoFourProducts) {
  for (auto& m : models_that_fit()) {
    if (m.name.rfind("layer", 0) != 0) continue;
    SCOPED_TRACE(m.name);
    Graph g = m.graph;
    Bindings in = inputs_for(g, m.pos);
    auto r = run(g, {"freeze", "constant_fold", "merge_matmuls", "dce"}, in, true);
    for (const auto& x : r) EXPECT_TRUE(x.bit_identical) << x.pass;
    EXPECT_EQ(count_op(g, Op::matmul) - 2, 4);  // and the two of attention
  }
}

TEST(ModelPasses, EachPassAloneKeepsTheSemantics) {
  const std::set<std::string> bit_exact = {"freeze", "cse", "simplify", "constant_fold", "dce", "decompose", "merge_matmuls"};
  for (auto& m : models_that_fit()) {
    Bindings in = inputs_for(m.graph, m.pos);
    for (const auto& p : pass_registry()) {
      SCOPED_TRACE(m.name + ": " + p.name);
      Graph g = m.graph;
      auto r = run(g, {p.name}, in, true);
      EXPECT_LE(r[0].max_rel_diff, 1e-13);
      if (bit_exact.count(p.name)) {
        EXPECT_TRUE(r[0].bit_identical);
      }
    }
  }
}

TEST(ModelPasses, DefaultPipelineWithAndWithoutFreezing) {
  for (bool freeze : {false, true}) {
    for (auto& m : models_that_fit()) {
      SCOPED_TRACE(m.name + (freeze ? " frozen" : ""));
      Bindings in = inputs_for(m.graph, m.pos);
      Graph g = m.graph;
      auto records = run(g, default_pipeline(freeze), in, freeze);
      for (const auto& r : records) EXPECT_LE(r.max_rel_diff, 1e-13) << r.pass;
      NodeCounts c = count_nodes(g);
      EXPECT_EQ(c.composite, 0);
      EXPECT_LT(c.total_ops, count_nodes(m.graph).total_ops + 40);
    }
  }
}

int count_op(const Graph& g, Op op) {
  int n = 0;
  for (const Node& x : g.nodes()) n += x.op == op;
  return n;
}

TEST(ModelPasses, AttentionIsMatchedInPrefillAndDecode) {
  for (auto& m : models_that_fit()) {
    if (m.name == "mlp") continue;
    SCOPED_TRACE(m.name);
    int layers = m.name.rfind("llama", 0) == 0 ? 2 : 1;
    Graph g = m.graph;
    Bindings in = inputs_for(g, m.pos);
    run(g, {"cse", "simplify", "match_attention", "dce"}, in, false);
    EXPECT_EQ(count_op(g, Op::flash_attn), layers);
    EXPECT_EQ(count_op(g, Op::softmax), 0);
    EXPECT_EQ(count_op(g, Op::causal_mask), 0);
    // Grouped-query: flash_attn reads the [B, 2, S, 16] caches directly.
    for (const Node& n : g.nodes()) {
      if (n.op != Op::flash_attn) continue;
      EXPECT_TRUE(n.attr_bool("causal"));
      EXPECT_EQ(g.type(n.inputs[1]).shape[1], Dim(2));
      EXPECT_EQ(g.node(n.inputs[1]).op, Op::kv_write);
      EXPECT_DOUBLE_EQ(n.attr_float("scale"), 0.25);
    }
  }
}

TEST(ModelPasses, DecomposingFirstFindsNoAttention) {
  Graph g = models::trace_llama_layer(tiny(), {1, 4, 4, DType::f64});
  Bindings in = inputs_for(g, 0);
  auto r = run(g, {"decompose", "match_attention"}, in, false);
  EXPECT_FALSE(r[1].changed);
  EXPECT_EQ(count_op(g, Op::flash_attn), 0);
}

TEST(ModelPasses, NormScalesFoldIntoTheWeights) {
  Graph g = models::trace_llama_layer(tiny(), {1, 4, 4, DType::f64});
  Bindings in = inputs_for(g, 0);
  run(g, {"fold_norm_weights"}, in, false);
  // Both norms now scale by ones...
  int norms = 0;
  for (const Node& n : g.nodes()) {
    if (n.op != Op::rms_norm) continue;
    ++norms;
    EXPECT_TRUE(is_splat(g, n.inputs[1], 1.0));
  }
  EXPECT_EQ(norms, 2);
  // ... and wq, wk, wv carry attn_norm, w_gate and w_up carry mlp_norm.
  std::map<std::string, std::string> carried;
  for (const Node& n : g.nodes()) {
    if (n.op != Op::mul) continue;
    const Node& scale = g.node(n.inputs[0]);
    const Node& w = g.node(n.inputs[1]);
    if (scale.op == Op::reshape && w.op == Op::param) carried[w.name] = g.node(scale.inputs[0]).name;
  }
  EXPECT_EQ(carried, (std::map<std::string, std::string>{{"wq", "attn_norm"},
                                                          {"wk", "attn_norm"},
                                                          {"wv", "attn_norm"},
                                                          {"w_gate", "mlp_norm"},
                                                          {"w_up", "mlp_norm"}}));
  // With freezing they become constants and the multiplications are gone.
  Graph f = models::trace_llama_layer(tiny(), {1, 4, 4, DType::f64});
  auto r = run(f, {"freeze", "fold_norm_weights", "constant_fold", "dce"}, in, true);
  EXPECT_LE(r.back().max_rel_diff, 1e-13);
  for (const Node& n : f.nodes()) {
    if (n.op == Op::matmul) {
      EXPECT_NE(f.node(n.inputs[1]).op, Op::param);
    }
  }
  EXPECT_EQ(count_op(f, Op::mul), count_op(models::trace_llama_layer(tiny(), {1, 4, 4, DType::f64}), Op::mul));
}

}  // namespace
}  // namespace tj
