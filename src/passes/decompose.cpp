// decompose: composite ops become primitives, so fusion sees only
// elementwise ops, reductions and matmuls. Each op's expansion is its row's
// `decompose` (src/ir/ops/composite.cpp and structure.cpp), which evaluates
// in the same order as the interpreter's kernel: in f64 bit-identical, in f32
// within an ulp or so of kernels that keep double intermediates.
// lower: the same for the ops that have no kernel at all (Fuse::lower, e.g.
// argmax); run_pipeline runs it after every pipeline. It is exact.
// lower_convs: convolutions into their window form (slices and a matmul per
// group), for targets without a conv kernel (the GPU emitters, for now).
#include "ir/decomposer.h"
#include "ir/rewriter.h"
#include "passes/passes.h"

namespace tj {

namespace {

bool expand(Graph& g, const std::function<bool(const Node&)>& wanted) {
  bool changed = false;
  Rewriter rw(g);
  g = rw.run([&](ValueId v) -> ValueId {
    const Node& n = g.node(v);
    if (!n.def().decompose || !wanted(n)) return Rewriter::kCopy;
    Decomposer d{rw.out(), n, rw.map_all(n.inputs)};
    changed = true;
    return n.def().decompose(d);
  });
  return changed;
}

}  // namespace

// Convolutions keep a kernel of their own; lower_convs expands them for
// targets without one.
bool decompose(Graph& g, const PassOptions&) {
  return expand(g, [](const Node& n) { return n.def().fuse != Fuse::conv; });
}

bool lower_convs(Graph& g, const PassOptions&) { return lower_convs_where(g, [](const Node&) { return true; }); }

bool lower_convs_where(Graph& g, const std::function<bool(const Node&)>& which) {
  return expand(g, [&](const Node& n) { return n.def().fuse == Fuse::conv && which(n); });
}

bool lower(Graph& g, const PassOptions&) {
  return expand(g, [](const Node& n) { return n.def().fuse == Fuse::lower; });
}

bool needs_lowering(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.def().fuse == Fuse::lower) return true;
  return false;
}

}  // namespace tj
