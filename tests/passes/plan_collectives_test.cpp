// The collectives a sharded graph calls for, and their bytes: text in,
// report out.
#include <gtest/gtest.h>

#include "ir/text.h"
#include "models/llama.h"
#include "passes/passes.h"
#include "tensorjit/error.h"

namespace tj {
namespace {

std::string plan(const std::string& text, bool propagate = false) {
  Graph g = parse_graph(text);
  if (propagate) propagate_shardings(g);
  return collectives_report(g, plan_collectives(g));
}

// Megatron's MLP: one all-reduce, where the partial sum meets the residual.
TEST(PlanCollectives, MegatronMlpAllReducesOnce) {
  EXPECT_EQ(plan("graph mlp\nmesh {tp=2}\ninput %x : f32[8,16]\nparam %w1 : f32[16,64@tp]\nparam %w2 : f32[64@tp,16]\n"
                 "%0 = matmul(%x, %w1) : f32[8,64]\n%1 = relu(%0) : f32[8,64]\n%2 = matmul(%1, %w2) : f32[8,16]\n"
                 "%3 = add(%x, %2) : f32[8,16]\nreturn %3\n",
                 true),
            "all_reduce %2 for add %3 over tp: f32[8,16] partial(tp) -> f32[8,16], 512 B, 512 B sent\n");
}

// Each kind, from an operand's layout to the one its reader needs.
TEST(PlanCollectives, EachKindWhereItIsNeeded) {
  const std::string head = "graph g\nmesh {tp=4}\n";
  // softmax reads its axis whole: gather it.
  EXPECT_EQ(plan(head + "input %x : f32[4,8@tp]\n%0 = softmax(%x) {axis=1} : f32[4,8]\nreturn %0\n"),
            "all_gather %x for softmax %0 over tp: f32[4,8@tp] -> f32[4,8], 32 B, 96 B sent\n");
  // A split that moves from one dim to another.
  EXPECT_EQ(plan(head + "input %x : f32[8@tp,4]\n%0 = exp(%x) : f32[8,4@tp]\nreturn %0\n"),
            "all_to_all %x for exp %0 over tp: f32[8@tp,4] -> f32[8,4@tp], 32 B, 24 B sent\n");
  // Replicated to split: each device takes its block.
  EXPECT_EQ(plan(head + "input %x : f32[8,4]\n%0 = exp(%x) : f32[8@tp,4]\nreturn %0\n"),
            "slice %x for exp %0 over tp: f32[8,4] -> f32[8@tp,4], 128 B, 0 B sent\n");
  // A partial sum its reader needs split: reduce-scatter.
  EXPECT_EQ(plan(head + "input %x : f32[8,16@tp]\ninput %w : f32[16@tp,4]\n%0 = matmul(%x, %w) : f32[8,4] partial(tp)\n"
                        "%1 = exp(%0) : f32[8@tp,4]\nreturn %1\n"),
            "reduce_scatter %0 for exp %1 over tp: f32[8,4] partial(tp) -> f32[8@tp,4], 128 B, 96 B sent\n");
  // A partial output is completed for the caller; splits stay.
  EXPECT_EQ(plan(head + "input %x : f32[8,16@tp]\ninput %w : f32[16@tp,4]\n%0 = matmul(%x, %w) : f32[8,4] partial(tp)\nreturn %0, %x\n"),
            "all_reduce %0 for the output over tp: f32[8,4] partial(tp) -> f32[8,4], 128 B, 192 B sent\n");
  // A value two readers need alike moves once.
  EXPECT_EQ(plan(head + "input %x : f32[4,8@tp]\n%0 = softmax(%x) {axis=1} : f32[4,8]\n%1 = amax(%x) {axes=[1]} : f32[4]\n"
                        "%2 = softmax(%x) {axis=1} : f32[4,8]\nreturn %0, %1, %2\n"),
            "all_gather %x for softmax %0 over tp: f32[4,8@tp] -> f32[4,8], 32 B, 96 B sent\n");
}

// The tiny Llama layer, Megatron style, at tp 2 and 4: exactly the two
// all-reduces of T*d values of a layer's forward, no all-gather (the
// formula the demo checks its collectives against).
TEST(PlanCollectives, LlamaLayerIsTwoAllReducesOfTd) {
  for (int64_t tp : {2, 4}) {
    SCOPED_TRACE(tp);
    const int64_t T = 4;
    Graph g = models::trace_llama_layer(models::llama_config("tiny"), {1, T, T, DType::f32});
    g.set_mesh(Mesh{{{"tp", tp}}});
    EXPECT_EQ(models::annotate_megatron(g, models::llama_config("tiny"), "tp"), tp == 2 ? 7 : 5);  // 2 KV heads: split by 2, whole at 4
    propagate_shardings(g);
    const std::vector<Collective> plan = plan_collectives(g);
    std::vector<Collective> p;  // the ones that communicate; slices are each device's own
    for (const Collective& c : plan)
      if (c.kind != Collective::Kind::slice) p.push_back(c);
    ASSERT_EQ(p.size(), 2u) << collectives_report(g, plan);
    for (const Collective& c : p) {
      EXPECT_EQ(c.kind, Collective::Kind::all_reduce);
      EXPECT_EQ(c.bytes, T * 128 * 4);
      EXPECT_EQ(c.wire_bytes, 2 * (tp - 1) * T * 128 * 4 / tp);
    }
    // At 4, the 2 KV heads are whole: each device computes them and takes
    // the repeated heads its query heads read, after the GQA reshape.
    const std::string report = collectives_report(g, plan);
    if (tp == 4) {
      EXPECT_NE(report.find("slice %37 after reshape %37 over tp: f32[1,8,4,16] -> f32[1,8@tp,4,16], 2048 B, 0 B sent"), std::string::npos) << report;
    } else {
      EXPECT_EQ(report.find("slice"), std::string::npos) << report;
    }
  }
}

TEST(PlanCollectives, NeedsAMesh) {
  Graph g = parse_graph("graph g\ninput %x : f32[4]\nreturn %x\n");
  EXPECT_THROW(plan_collectives(g), Error);
}

}  // namespace
}  // namespace tj
