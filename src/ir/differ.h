// What an op row's derivative rule (OpDef::grad) builds with, in reverse
// mode: the node (in the forward graph), its operands and result as values
// of the joint graph being built, the cotangent of its result, and give(),
// which adds a cotangent to an operand's. The autodiff stage
// (src/autodiff/vjp.cpp) calls each row's rule, last node first, and sums
// what was given: over the dims broadcasting added, cast to the operand's
// dtype. A rule gives nothing to an operand it has no derivative for
// (indices, masks) or that wants none.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace tj {

struct Differ {
  Graph& g;                  // the joint graph: the forward graph's values keep their ids
  const Node& n;             // in the forward graph (not g: adding nodes to g moves g's)
  ValueId y;                 // n's value
  ValueId dy;                // its cotangent, of n's type
  std::vector<bool> wanted;  // per operand: does any gradient asked for flow through it
  std::vector<std::pair<int, ValueId>> given;
  // For control flow: a region's backward, from the autodiff stage. Given a
  // region whose first output is differentiated and the indices of the
  // inputs wanted, a region taking the same inputs then that output's
  // cotangent, and returning the wanted inputs' cotangents in order.
  std::function<Region(const Graph& region, const std::vector<size_t>& inputs)> region_grad;

  ValueId x(size_t i) const { return n.inputs.at(i); }
  // By value: a reference into g would dangle once a node is added (an
  // argument evaluated before another that adds one).
  Type type(ValueId v) const { return g.type(v); }
  bool wants(size_t i) const { return wanted.at(i); }
  void give(size_t i, ValueId d) {
    if (wants(i)) given.emplace_back(static_cast<int>(i), d);
  }

  DType dtype() const { return n.type.dtype; }
  // A scalar constant of n's dtype (or `dt`).
  ValueId c(double v) const { return c(v, n.type.dtype); }
  ValueId c(double v, DType dt) const { return g.add_const({dt, {}}, std::vector<double>{v}); }
  ValueId op(Op o, std::vector<ValueId> operands, const NamedAttrs& attrs = {}) const { return g.add(o, std::move(operands), attrs); }
  ValueId add(ValueId a, ValueId b) const { return op(Op::add, {a, b}); }
  ValueId sub(ValueId a, ValueId b) const { return op(Op::sub, {a, b}); }
  ValueId mul(ValueId a, ValueId b) const { return op(Op::mul, {a, b}); }
  ValueId div(ValueId a, ValueId b) const { return op(Op::div, {a, b}); }
  ValueId neg(ValueId a) const { return op(Op::neg, {a}); }
  // `where(cond, v, 0)`.
  ValueId keep(ValueId cond, ValueId v) const { return op(Op::where, {cond, v, c(0.0, g.type(v).dtype)}); }
  // A reduction over `axes`, keeping them (size 1).
  ValueId reduce(Op o, ValueId v, std::vector<int64_t> axes) const {
    return op(o, {v}, {{"axes", std::move(axes)}, {"keepdim", true}});
  }
  // `v` (a shape that broadcasts to `to`) expanded to it.
  ValueId expand_to(ValueId v, const Shape& to) const {
    return g.type(v).shape == to ? v : op(Op::expand, {v}, {{"shape", to}});
  }
  // Zeros of a type.
  ValueId zeros(const Type& t) const { return expand_to(c(0.0, t.dtype), t.shape); }
  // A dim's size as a scalar of `dt`: a constant, or for a symbolic dim the
  // sum of that many ones (known only when the graph runs).
  ValueId size(const Dim& d, DType dt) const {
    if (auto k = d.as_const()) return c(static_cast<double>(*k), dt);
    return op(Op::sum, {expand_to(c(1.0, dt), {d})}, {{"axes", std::vector<int64_t>{0}}});
  }
  // The node's result with its reduced `axes` kept (size 1), as `v`
  // (of the result's shape) is reshaped.
  ValueId keepdim(ValueId v, const Shape& kept) const {
    return g.type(v).shape == kept ? v : op(Op::reshape, {v}, {{"shape", kept}});
  }
};

}  // namespace tj
