// Meshes and shardings in the text form: round trips, and every ill-formed
// annotation refused by the parser (line:column) and by the verifier.
#include <gtest/gtest.h>

#include "ir/sharding.h"
#include "ir/text.h"
#include "ir/verifier.h"
#include "tensorjit/error.h"

namespace tj {
namespace {

// Megatron's MLP on 2 devices: W1 split by columns, W2 by rows; the second
// matmul's result is a partial sum until it is all-reduced.
const char* kMegatron =
    "graph mlp\n"
    "mesh {tp=2}\n"
    "input %x : f32[8,16]\n"
    "param %w1 : f32[16,64@tp]\n"
    "param %w2 : f32[64@tp,16]\n"
    "%0 = matmul(%x, %w1) : f32[8,64@tp]\n"
    "%1 = relu(%0) : f32[8,64@tp]\n"
    "%2 = matmul(%1, %w2) : f32[8,16] partial(tp)\n"
    "return %2\n";

TEST(Sharding, PrintsAndParsesBackByteForByte) {
  for (const char* text : {kMegatron,
                           "graph g\nmesh {dp=2, tp=4}\ninput %x : f32[16@dp,32@tp]\n%0 = exp(%x) : f32[16@dp,32@tp]\n"
                           "%1 = amax(%0) {axes=[1]} : f32[16@dp] partial(tp:max)\nreturn %1\n",
                           "graph g\nmesh {dp=2, tp=2}\ninput %x : f32[16@(dp,tp),8]\nreturn %x\n"}) {
    SCOPED_TRACE(text);
    Graph g = parse_graph(text);
    verify(g);
    EXPECT_EQ(print_graph(g), text);
  }
}

TEST(Sharding, GraphHoldsTheMeshAndEachValuesSharding) {
  Graph g = parse_graph(kMegatron);
  EXPECT_EQ(g.mesh().str(), "{tp=2}");
  EXPECT_EQ(g.mesh().devices(), 2);
  const ValueId w1 = g.find("w1"), x = g.find("x");
  ASSERT_NE(g.sharding(w1), nullptr);
  EXPECT_EQ(g.sharding(w1)->dims, (std::vector<std::vector<std::string>>{{}, {"tp"}}));
  EXPECT_EQ(g.sharding(x), nullptr);  // unannotated: propagation's to choose
  const Sharding* out = g.sharding(g.outputs()[0]);
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(out->partial.size(), 1u);
  EXPECT_EQ(out->partial[0].first, "tp");
  EXPECT_EQ(out->partial[0].second, Reduction::sum);
  // A replicated annotation prints as the plain type.
  Sharding none{{{}, {}}, {}};
  EXPECT_TRUE(none.replicated());
  EXPECT_EQ(sharded_type_str(g.type(x), &none), "f32[8,16]");
}

struct Bad {
  const char* text;
  const char* says;
};

TEST(Sharding, IllFormedAnnotationsAreParseErrors) {
  const Bad cases[] = {
      {"graph g\ninput %x : f32[8@tp]\nreturn %x\n", "the graph has no mesh"},
      {"graph g\nmesh {tp=2}\ninput %x : f32[8@dp]\nreturn %x\n", "has no axis 'dp'"},
      {"graph g\nmesh {tp=3}\ninput %x : f32[8@tp]\nreturn %x\n", "dim 0 of 8 does not split over 3 devices"},
      {"graph g\nmesh {tp=2}\ninput %x : f32[8@tp,4@tp]\nreturn %x\n", "axis 'tp' is used twice"},
      {"graph g\nmesh {tp=2}\ninput %x : f32[8@tp] partial(tp)\nreturn %x\n", "axis 'tp' is used twice"},
      {"graph g\nmesh {tp=2}\ninput %x : f32[S@tp]\nreturn %x\n", "is symbolic"},
      {"graph g\nmesh {tp=2}\ninput %x : f32[8] partial(tp:mean)\nreturn %x\n", "unknown reduction"},
      {"graph g\nmesh {tp=2, tp=2}\ninput %x : f32[8]\nreturn %x\n", "mesh axis named twice"},
      {"graph g\nmesh {tp=0}\ninput %x : f32[8]\nreturn %x\n", "a mesh axis has 1 to 2^20 devices"},
      {"graph g\nmesh {a=1024, b=1024, c=2}\ninput %x : f32[8]\nreturn %x\n", "a mesh of more than 2^20 devices"},
      {"graph g\nmesh {tp=2}\ninput %x : f32[8@]\nreturn %x\n", "expected a mesh axis"},
      {"graph g\nmesh {tp=2}\ninput %x : f32[8@(tp]\nreturn %x\n", "expected ')'"},
      {"graph g\ninput %x : f32[8]\nmesh {tp=2}\nreturn %x\n", "expected 'input', 'param', '%value' or 'return'"},
      {"graph g\nmesh {tp=2}\ninput %x : f32[8]\n%0 = exp(%x) : f32[8@tp,2]\nreturn %0\n", "declared type"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.text);
    try {
      parse_graph(c.text);
      ADD_FAILURE() << "parsed";
    } catch (const ParseError& e) {
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
      EXPECT_GE(e.line(), 2);
    }
  }
}

TEST(Sharding, TheVerifierChecksShardingsSetInCode) {
  Graph g = parse_graph(kMegatron);
  Sharding bad{{{}, {"dp"}}, {}};
  g.set_sharding(g.find("w1"), bad);
  try {
    verify(g);
    ADD_FAILURE() << "verified";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("verifier: node %1 (param): sharding f32[16,64@dp]: the mesh {tp=2} has no axis 'dp'"), std::string::npos)
        << e.what();
  }
  g.set_sharding(g.find("w1"), Sharding{{{"tp"}}, {}});  // rank 1 for a rank-2 value
  EXPECT_THROW(verify(g), Error);
  EXPECT_THROW(g.set_sharding(99, Sharding{}), Error);
}

}  // namespace
}  // namespace tj
