// What an op row's decomposition builds with: the node being expanded, its
// operands already in the graph being built, and helpers for constants and
// ops of the node's dtype. The decompose pass (and the compiler driver's
// lowering of Fuse::lower ops) calls the row's DecomposeFn with it.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace tj {

struct Decomposer {
  Graph& g;
  const Node& n;                // in the graph being rewritten
  std::vector<ValueId> in;      // n's operands, in g

  DType dtype() const { return n.type.dtype; }
  // A scalar constant of n's dtype (or `dt`).
  ValueId c(double v) const { return c(v, n.type.dtype); }
  ValueId c(double v, DType dt) const { return g.add_const({dt, {}}, std::vector<double>{v}); }
  ValueId op(Op o, std::vector<ValueId> operands, const NamedAttrs& attrs = {}) const {
    return g.add(o, std::move(operands), attrs);
  }
  // A reduction over one axis, keeping it (size 1).
  ValueId reduce(Op o, ValueId x, int64_t axis) const {
    return op(o, {x}, {{"axes", std::vector<int64_t>{axis}}, {"keepdim", true}});
  }
};

}  // namespace tj
