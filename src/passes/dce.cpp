// dce: drops nodes whose results no output depends on.
// Assumes nothing; guarantees a bit-identical result. Inputs and params are
// kept even when unused: they are the graph's interface.
#include "ir/rewriter.h"
#include "passes/passes.h"

namespace tj {

bool dce(Graph& g, const PassOptions&) {
  const std::vector<bool> live = live_values(g);
  bool changed = false;
  for (size_t i = 0; i < g.size(); ++i) {
    Op op = g.nodes()[i].op;
    if (!live[i] && op != Op::input && op != Op::param) changed = true;
  }
  if (!changed) return false;
  g = Rewriter(g).run([&](ValueId v) { return live[static_cast<size_t>(v)] ? Rewriter::kCopy : Rewriter::kDrop; });
  return true;
}

}  // namespace tj
