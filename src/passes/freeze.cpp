// freeze: params become constants holding their values (inference: weights
// are known at compile time), so weight-only subgraphs can be folded.
// Assumes the values given match the params' types; throws otherwise.
// Guarantees a bit-identical result for those values. Params without a value
// stay params; frozen params stay declared (the interface does not change)
// but nothing uses them.
#include "ir/rewriter.h"
#include "passes/passes.h"
#include "tensorjit/error.h"

namespace tj {

bool freeze(Graph& g, const PassOptions& o) {
  if (!o.freeze_values) return false;
  std::vector<const NDArray*> value(g.size(), nullptr);
  bool any = false;
  for (ValueId p : g.params()) {
    const Node& n = g.node(p);
    auto it = o.freeze_values->find(n.name);
    if (it == o.freeze_values->end()) continue;
    const NDArray& a = it->second;
    std::vector<int64_t> shape;
    for (const Dim& d : n.type.shape) shape.push_back(d.as_const().value_or(-1));
    if (a.shape() != shape || is_float(a.dtype()) != is_float(n.type.dtype))
      throw Error("freeze: value for param '" + n.name + "' is " + a.type_str() + ", expected " + n.type.str());
    value[static_cast<size_t>(p)] = &a;
    any = true;
  }
  if (!any) return false;

  Rewriter rw(g);
  std::vector<bool> made(g.size(), false);
  g = rw.run([&](ValueId v) {
    // Each frozen param becomes a constant just before its first use.
    for (ValueId in : g.node(v).inputs) {
      const NDArray* a = value[static_cast<size_t>(in)];
      if (!a || made[static_cast<size_t>(in)]) continue;
      // The values in their dtype, one copy (a float param's array is in its
      // type's dtype, checked above; an integer one is converted).
      rw.set(in, rw.out().add_const(g.type(in), ConstValues::adopt(*a)));
      made[static_cast<size_t>(in)] = true;
    }
    return Rewriter::kCopy;
  });
  return true;
}

}  // namespace tj
