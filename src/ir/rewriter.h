// Graph rebuilding for passes. The IR is append-only, so a pass builds a new
// graph: it walks the old nodes in order and, for each, either copies it (with
// its operands remapped) or maps it to another value of the new graph, which
// it may first build. Inputs and params are always copied, in order, so the
// graph's interface never changes.
#pragma once

#include <optional>

#include <functional>
#include <vector>

#include "ir/graph.h"

namespace tj {

class Rewriter {
 public:
  explicit Rewriter(const Graph& old) : old_(old), out_(old.name()), map_(old.size(), -1) {}

  const Graph& old() const { return old_; }
  Graph& out() { return out_; }
  // The new value standing for old value `v` (must already be visited).
  ValueId map(ValueId v) const { return map_.at(static_cast<size_t>(v)); }
  std::vector<ValueId> map_all(const std::vector<ValueId>& vs) const;
  // Copies old node `v` into the new graph with remapped operands.
  ValueId copy(ValueId v);
  void set(ValueId old_value, ValueId new_value) { map_.at(static_cast<size_t>(old_value)) = new_value; }

  static constexpr ValueId kCopy = -1;  // copy the node unchanged
  static constexpr ValueId kDrop = -2;  // leave the node out (it must be unused)

  // Visits every node in order: `f(old_value)` returns the new value for it,
  // kCopy or kDrop. Inputs and params are always copied. Outputs are remapped
  // at the end.
  Graph run(const std::function<ValueId(ValueId)>& f);

 private:
  const Graph& old_;
  Graph out_;
  std::vector<ValueId> map_;
};

// Users of every value; graph outputs count as a use by a pseudo-user `-1`.
std::vector<std::vector<ValueId>> users_of(const Graph& g);
// Whether some graph output depends on each value.
std::vector<bool> live_values(const Graph& g);

// True if `v` is a constant whose every element equals `x` (bitwise for
// zeros, so -0.0 and +0.0 differ).
bool is_splat(const Graph& g, ValueId v, double x);
// The one value of a constant stored as a single element (a splat of any
// shape), if `v` is one.
std::optional<double> splat_value(const Graph& g, ValueId v);
bool is_constant(const Graph& g, ValueId v);
// A frozen weight matrix: a constant of rank 2 with concrete dims that is
// not a splat (merge_matmuls, quantize_weights).
bool is_weight_matrix(const Graph& g, ValueId v);

}  // namespace tj
