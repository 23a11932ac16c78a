// The partitioner (autodiff/partition.h): what it saves for ReLU, RMSNorm
// and the Llama layer, and that forward-then-backward gives the joint
// graph's gradients.
#include <gtest/gtest.h>

#include "autodiff/partition.h"
#include "ir/text.h"
#include "models/llama.h"
#include "passes/pipeline.h"
#include "reference/interpreter.h"
#include "reference/random_inputs.h"

namespace tj {
namespace {

// The partitioned forward, then the backward on its saved values, against
// the joint graph's gradients (interpreted, f64).
void check_against_joint(const Graph& g, const Vjp& v, const Partition& p) {
  RandomInputOptions ro;
  ro.seed = 4;
  Bindings in = random_inputs(v.joint, ro);
  auto want = interpret(v.joint, in, {DType::f64});
  Bindings fin;
  for (ValueId x : p.forward.inputs()) fin[p.forward.node(x).name] = in.at(p.forward.node(x).name);
  for (ValueId x : p.forward.params()) fin[p.forward.node(x).name] = in.at(p.forward.node(x).name);
  auto fwd = interpret(p.forward, fin, {DType::f64});
  ASSERT_EQ(fwd.size(), g.outputs().size() + p.saved.size());
  Bindings bin;
  for (size_t k = 0; k < p.saved.size(); ++k) bin[p.saved[k].name] = fwd[g.outputs().size() + k];
  for (ValueId x : p.backward.inputs())
    if (!bin.count(p.backward.node(x).name)) bin[p.backward.node(x).name] = in.at(p.backward.node(x).name);
  auto back = interpret(p.backward, bin, {DType::f64});
  std::vector<NDArray> grads(want.begin() + static_cast<std::ptrdiff_t>(v.forward_outputs), want.end());
  EXPECT_LE(compare_outputs(back, grads).max_rel, 1e-10);
  EXPECT_LE(compare_outputs(std::vector<NDArray>(fwd.begin(), fwd.begin() + static_cast<std::ptrdiff_t>(g.outputs().size())),
                            std::vector<NDArray>(want.begin(), want.begin() + static_cast<std::ptrdiff_t>(v.forward_outputs)))
                .max_rel,
            1e-10);
}

Vjp differentiate(const Graph& g, std::vector<std::string> wrt) {
  VjpSpec s;
  s.wrt = std::move(wrt);
  return vjp(g, s);
}

// sum(relu(x @ w)): the backward needs only where x @ w > 0, a bool mask,
// not the f32 product (a quarter of its bytes).
TEST(Partition, ReluSavesABoolMask) {
  Graph g = parse_graph("graph f\ninput %x : f32[64,32]\nparam %w : f32[32,128]\n%0 = matmul(%x, %w) : f32[64,128]\n"
                        "%1 = relu(%0) : f32[64,128]\n%2 = sum(%1) {axes=[0, 1]} : f32[]\nreturn %2\n");
  Vjp v = differentiate(g, {"w"});
  Partition p = partition(g, v);
  ASSERT_EQ(p.saved.size(), 1u);
  EXPECT_EQ(p.saved[0].type.str(), "bool[64,128]");
  EXPECT_EQ(p.saved[0].op, "gt");
  EXPECT_EQ(p.saved_bytes, 64 * 128);
  EXPECT_EQ(p.reused, std::vector<std::string>{"x"});
  check_against_joint(g, v, p);
}

// rms_norm(x, w) @ m: the backward saves the per-row statistic (mean of
// x^2) and recomputes the normalized rows from it and x, rather than save
// them (16 floats against 1024).
TEST(Partition, RmsNormSavesItsRowStatistic) {
  Graph g = parse_graph("graph f\ninput %x : f32[16,64]\nparam %nw : f32[64]\nparam %m : f32[64,64]\n"
                        "%0 = rms_norm(%x, %nw) : f32[16,64]\n%1 = matmul(%0, %m) : f32[16,64]\nreturn %1\n");
  Vjp v = differentiate(g, {"nw", "m"});
  Partition p = partition(g, v);
  ASSERT_EQ(p.saved.size(), 1u);
  EXPECT_EQ(p.saved[0].type.str(), "f32[16,1]");  // mean(x^2) per row
  EXPECT_EQ(p.saved[0].op, "mean");
  EXPECT_EQ(p.saved_bytes, 16 * 4);
  check_against_joint(g, v, p);
}

// The tiny Llama layer: at most 60% of what saving every forward value
// holds, and the same gradients.
TEST(Partition, LlamaLayerSavesLittle) {
  models::Shapes s;
  s.tokens = 16, s.kv_len = 16, s.dtype = DType::f32;
  Graph g = models::trace_llama_layer(models::llama_config("tiny"), s);
  std::vector<std::string> wrt;
  for (ValueId x : g.params())
    if (g.node(x).name.rfind("rope_", 0) != 0) wrt.push_back(g.node(x).name);
  wrt.push_back("x");
  VjpSpec spec;
  spec.wrt = wrt;
  spec.outputs = {0};
  Vjp v = vjp(g, spec);
  Partition p = partition(g, v);
  std::printf("[ partition ] llama layer: %zu values saved, %lld bytes of %lld (%.0f%%), %d recomputed\n", p.saved.size(),
              (long long)p.saved_bytes, (long long)p.every_forward_value_bytes, 100.0 * static_cast<double>(p.saved_bytes) / static_cast<double>(p.every_forward_value_bytes),
              p.recomputed);
  EXPECT_LE(p.saved_bytes * 10, p.every_forward_value_bytes * 6);
  check_against_joint(g, v, p);
}

}  // namespace
}  // namespace tj
