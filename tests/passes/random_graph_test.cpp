// Random graphs from the op set through the whole pipeline (frozen or not)
// still match the interpreter.
#include <gtest/gtest.h>

#include "ir/text.h"
#include "passes/pipeline.h"
#include "reference/random_inputs.h"
#include "support/random_graph.h"

namespace tj {
namespace {

TEST(RandomGraphs, PipelineMatchesInterpreter) {
  int changed = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    Graph g = testing::random_graph(seed);
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + print_graph(g));
    Bindings in = random_inputs(g, seed);
    PipelineOptions o;
    o.differential = true;
    o.inputs = &in;
    bool freeze = seed % 2 == 1;
    if (freeze) o.pass.freeze_values = &in;
    auto records = run_pipeline(g, default_pipeline(freeze), o);
    for (const auto& r : records) {
      ASSERT_LE(r.max_rel_diff, 1e-12) << r.pass << " broke it:\n" << print_graph(g);
      changed += r.changed;
    }
    // The optimized graph is valid text.
    EXPECT_EQ(print_graph(parse_graph(print_graph(g))), print_graph(g));
  }
  EXPECT_GT(changed, 300);  // the passes had work to do
}

}  // namespace
}  // namespace tj
