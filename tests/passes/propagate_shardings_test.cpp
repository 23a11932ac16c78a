// Factor rules (ir/factors.h) and sharding propagation, text in, text out.
#include <gtest/gtest.h>

#include "ir/factors.h"
#include "ir/text.h"
#include "ir/verifier.h"
#include "models/llama.h"
#include "passes/passes.h"
#include "tensorjit/error.h"

namespace tj {
namespace {

// The rule of the graph's last computed value.
std::string rule_of(const std::string& text) {
  Graph g = parse_graph(text);
  return factor_rule(g, g.outputs()[0]).str();
}

TEST(FactorRules, SayHowEachOpsDimsCorrespond) {
  EXPECT_EQ(rule_of("graph g\ninput %a : f32[2,8,16]\ninput %b : f32[16,4]\n%0 = matmul(%a, %b) : f32[2,8,4]\nreturn %0\n"),
            "(a,b,c),(c,d)->(a,b,d) c:sum");
  EXPECT_EQ(rule_of("graph g\ninput %a : f32[8,1]\ninput %b : f32[4]\n%0 = add(%a, %b) : f32[8,4]\nreturn %0\n"), "(a,_),(b)->(a,b)");
  EXPECT_EQ(rule_of("graph g\ninput %a : f32[8,4]\n%0 = sum(%a) {axes=[1]} : f32[8]\nreturn %0\n"), "(a,b)->(a) b:sum");
  EXPECT_EQ(rule_of("graph g\ninput %a : f32[8,4]\n%0 = amax(%a) {axes=[0], keepdim=true} : f32[1,4]\nreturn %0\n"), "(a,b)->(_,b) a:max");
  EXPECT_EQ(rule_of("graph g\ninput %a : f32[8,4]\n%0 = mean(%a) {axes=[1]} : f32[8]\nreturn %0\n"), "(a,b)->(a) b:whole");
  EXPECT_EQ(rule_of("graph g\ninput %a : f32[2,3,4]\n%0 = permute(%a) {perm=[2, 0, 1]} : f32[4,2,3]\nreturn %0\n"), "(a,b,c)->(c,a,b)");
  // Heads out of a model dim: 128 splits as its major factor, 8 heads.
  EXPECT_EQ(rule_of("graph g\ninput %a : f32[1,4,128]\n%0 = reshape(%a) {shape=[1, 4, 8, 16]} : f32[1,4,8,16]\nreturn %0\n"),
            "(_,a,b)->(_,a,b,c) c:whole");
  EXPECT_EQ(rule_of("graph g\ninput %a : f32[4,8,16]\n%0 = reshape(%a) {shape=[4, 128]} : f32[4,128]\nreturn %0\n"), "(a,b,c)->(a,b) c:whole");
  EXPECT_EQ(rule_of("graph g\ninput %a : f32[2,8]\n%0 = softmax(%a) {axis=1} : f32[2,8]\nreturn %0\n"), "(a,b)->(a,b) b:whole");
  EXPECT_EQ(rule_of("graph g\ninput %a : f32[2,8]\ninput %w : f32[8]\n%0 = rms_norm(%a, %w) : f32[2,8]\nreturn %0\n"), "(a,b),(b)->(a,b) b:whole");
  // No rule: whole values.
  EXPECT_EQ(rule_of("graph g\ninput %a : f32[6,2]\ninput %i : i64[3]\n%0 = gather(%a, %i) : f32[3,2]\nreturn %0\n"), "(a,b),(c)->(d,e) a:whole b:whole c:whole d:whole e:whole");
}

std::string propagated(const std::string& text, std::vector<ShardingChoice>* choices = nullptr) {
  Graph g = parse_graph(text);
  std::vector<ShardingChoice> c = propagate_shardings(g);
  verify(g);
  if (choices) *choices = c;
  return print_graph(g);
}

// Megatron's MLP: W1 by columns, W2 by rows. The hidden values follow W1's
// split, the second product is a partial sum; x stays whole.
TEST(PropagateShardings, MegatronMlpFromItsWeights) {
  std::vector<ShardingChoice> why;
  EXPECT_EQ(propagated("graph mlp\nmesh {tp=2}\ninput %x : f32[8,16]\nparam %w1 : f32[16,64@tp]\nparam %w2 : f32[64@tp,16]\n"
                       "%0 = matmul(%x, %w1) : f32[8,64]\n%1 = relu(%0) : f32[8,64]\n%2 = matmul(%1, %w2) : f32[8,16]\n"
                       "%3 = add(%x, %2) : f32[8,16]\nreturn %3\n",
                       &why),
            "graph mlp\nmesh {tp=2}\ninput %x : f32[8,16]\nparam %w1 : f32[16,64@tp]\nparam %w2 : f32[64@tp,16]\n"
            "%0 = matmul(%x, %w1) : f32[8,64@tp]\n%1 = relu(%0) : f32[8,64@tp]\n%2 = matmul(%1, %w2) : f32[8,16] partial(tp)\n"
            "%3 = add(%x, %2) : f32[8,16]\nreturn %3\n");
  ASSERT_EQ(why.size(), 3u);
  EXPECT_EQ(why[0].why, "dim 1 over tp from %w1 dim 1 through matmul %0");
  EXPECT_EQ(why[2].why, "partial sum over tp from %w2 dim 0 through matmul %2");
}

// Backward too: a split of the result reaches the operands that have it.
TEST(PropagateShardings, BackwardFromAnAnnotatedResult) {
  EXPECT_EQ(propagated("graph g\nmesh {dp=2}\ninput %x : f32[8,16]\ninput %y : f32[8,16]\n%0 = mul(%x, %y) : f32[8,16]\n"
                       "%1 = exp(%0) : f32[8@dp,16]\nreturn %1\n"),
            "graph g\nmesh {dp=2}\ninput %x : f32[8@dp,16]\ninput %y : f32[8@dp,16]\n%0 = mul(%x, %y) : f32[8@dp,16]\n"
            "%1 = exp(%0) : f32[8@dp,16]\nreturn %1\n");
}

// What cannot hold is not given, and is reported: softmax's axis stays
// whole, an annotated value keeps its split.
TEST(PropagateShardings, ConflictsAreReportedNotForced) {
  std::vector<ShardingChoice> why;
  const std::string out = propagated(
      "graph g\nmesh {a=2, b=4}\ninput %x : f32[4,8@a]\ninput %z : f32[4,8@b]\n%0 = softmax(%x) {axis=1} : f32[4,8]\n%1 = add(%x, %z) : f32[4,8]\nreturn %0, %1\n",
      &why);
  EXPECT_NE(out.find("%0 = softmax(%x) {axis=1} : f32[4,8]\n"), std::string::npos) << out;
  EXPECT_NE(out.find("%1 = add(%x, %z) : f32[4,8@a]\n"), std::string::npos) << out;
  int conflicts = 0;
  for (const ShardingChoice& c : why) conflicts += c.value < 0;
  EXPECT_GE(conflicts, 1);
}

// The tiny Llama layer, Megatron style: QKV and gate/up by columns, O and
// down by rows. Every head-shaped value splits by heads, the two row-parallel
// products are the only partial values: the 2 all-reduces of a layer.
TEST(PropagateShardings, LlamaLayerMegatron) {
  Graph g = models::trace_llama_layer(models::llama_config("tiny"), {1, 4, 4, DType::f32});
  g.set_mesh(Mesh{{{"tp", 2}}});
  EXPECT_EQ(models::annotate_megatron(g, models::llama_config("tiny"), "tp"), 7);
  propagate_shardings(g);
  verify(g);
  int partial = 0;
  for (size_t v = 0; v < g.size(); ++v) {
    const Sharding* s = g.sharding(static_cast<ValueId>(v));
    if (s && !s->partial.empty()) ++partial;
  }
  EXPECT_EQ(partial, 2) << print_graph(g);
  const std::string text = print_graph(g);
  EXPECT_NE(text.find("softmax(%42) {axis=3} : f32[1,8@tp,4,4]"), std::string::npos) << text;  // the attention scores, by heads
  EXPECT_NE(text.find("input %k_cache : f32[1,2@tp,4,16]"), std::string::npos) << text;      // the caches, by KV heads
  EXPECT_NE(text.find("matmul(%49, %wo) : f32[1,4,128] partial(tp)"), std::string::npos) << text;
  EXPECT_NE(text.find("input %x : f32[1,4,128]\n"), std::string::npos) << text;  // the activations between blocks whole
}

TEST(PropagateShardings, NeedsAMesh) {
  Graph g = parse_graph("graph g\ninput %x : f32[4]\nreturn %x\n");
  EXPECT_THROW(propagate_shardings(g), Error);
}

}  // namespace
}  // namespace tj
