// Memory planning over real schedules: lifetimes, in-place reuse, kv_write
// into its cache, reordering the branches example.
#include <gtest/gtest.h>

#include "compiler/analysis.h"
#include "ir/text.h"
#include "memory/lifetimes.h"
#include "models/branches.h"
#include "models/llama.h"

namespace tj {
namespace {

TEST(MemoryLifetimes, ReorderingTheBranchesExampleLowersThePeakFourfold) {
  Graph g = models::trace_branches();
  Schedule s = fuse(g);
  ASSERT_EQ(s.kernels.size(), 8u);  // four matmuls, four row sums with the adds
  ActivationPlan breadth_first = plan_activations(g, s);
  ActivationPlan reordered = plan_activations(g, reorder_schedule(g, s));
  const int64_t big = int64_t{2048} * 16384 * 4;
  EXPECT_GE(breadth_first.plan.peak_bytes, 4 * big);
  EXPECT_LT(reordered.plan.peak_bytes, big + big / 100);
  EXPECT_TRUE(plan_is_valid(reordered.slots, reordered.plan));
  EXPECT_EQ(reordered.plan.peak_bytes, reordered.plan.lower_bound_bytes);
}

TEST(MemoryLifetimes, ElementwiseResultReusesADeadInputInPlace) {
  Graph g = parse_graph(
      "graph g\ninput %x : f32[64,64]\nparam %w : f32[64,64]\n"
      "%0 = exp(%x) : f32[64,64]\n%1 = matmul(%0, %w) : f32[64,64]\n%2 = sum(%1) {axes=[0]} : f32[64]\n"
      "%3 = tanh(%1) : f32[64,64]\nreturn %3, %2\n");
  FusionOptions o;
  o.epilogue = false;
  Schedule s = fuse(g, o);
  ASSERT_EQ(s.kernels.size(), 4u);  // exp | matmul | sum | tanh
  ActivationPlan with = plan_activations(g, s, true), without = plan_activations(g, s, false);
  EXPECT_EQ(with.in_place, 1);  // tanh writes over the matmul's result, which dies there
  EXPECT_EQ(without.in_place, 0);
  EXPECT_LT(with.slots.size(), without.slots.size());
  EXPECT_TRUE(plan_is_valid(with.slots, with.plan));
  // Outputs stay live to the end.
  for (const auto& b : with.buffers)
    if (b.value == g.outputs()[0] || b.value == g.outputs()[1]) {
      EXPECT_EQ(b.last, 3);
    }
}

TEST(MemoryLifetimes, KvWriteIsInPlaceInItsCache) {
  Graph g = prepare_variant(models::trace_llama_layer(models::llama_config("tiny"), {1, 1, 64, DType::f32}),
                            Variant::fused_flash);
  Schedule s = fuse(g);
  ActivationPlan p = plan_activations(g, s);
  int kv_writes = 0;
  for (const Kernel& k : s.kernels)
    for (ValueId v : k.outputs) kv_writes += g.node(v).op == Op::kv_write;
  EXPECT_EQ(kv_writes, 2);
  for (const auto& b : p.buffers) EXPECT_NE(g.node(b.value).op, Op::kv_write);
  EXPECT_TRUE(plan_is_valid(p.slots, p.plan));
  EXPECT_GE(p.plan.peak_bytes, p.plan.lower_bound_bytes);
}

TEST(MemoryLifetimes, Llama8BPrefillAccount) {
  Graph g = models::trace_llama_layer(models::llama_config("llama3-8b"), {1, 2048, 2048, DType::bf16});
  MemoryAccount flash = memory_account(g, Variant::fused_flash), plain = memory_account(g, Variant::fused);
  EXPECT_EQ(flash.weight_bytes, int64_t{218112000} * 2);  // 4096*(4096+1024+1024+4096) + 3*4096*14336 + 2*4096
  EXPECT_EQ(flash.kv_cache_bytes, 2 * int64_t{8} * 2048 * 128 * 2);
  EXPECT_GE(flash.peak_activation_bytes, flash.lower_bound_bytes);
  // Without flash_attn the [32, 2048, 2048] scores dominate.
  EXPECT_GE(plain.peak_activation_bytes, int64_t{32} * 2048 * 2048 * 2);
  EXPECT_LT(flash.peak_activation_bytes, int64_t{32} * 2048 * 2048 * 2);
}

}  // namespace
}  // namespace tj
