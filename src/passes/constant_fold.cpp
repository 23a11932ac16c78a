// constant_fold: a node whose operands are all constants is evaluated now,
// with the interpreter's own kernels, and replaced by a constant.
// Evaluation happens in the node's precision (f32, bf16, f16 nodes in float;
// f64, integer and bool nodes in double), so the folded graph interpreted in
// its own dtypes gives bit-identical results. Elementwise ops on splats fold
// to a splat. A fold that would grow the data (iota, causal_mask, expand,
// outer products) is left to run time: it would only add memory traffic.
#include <numeric>

#include "passes/passes.h"
#include "passes/rewriter.h"
#include "runtime/reference_kernels.h"

namespace tj {

namespace {

int64_t stored(const Node& n) { return static_cast<int64_t>(n.const_data()->size()); }

bool is_splat_const(const Node& n) { return n.op == Op::constant && n.const_data()->size() == 1; }

template <class T>
std::vector<double> evaluate(const Graph& g, const Node& n, bool as_splat) {
  std::vector<Array<T>> arrays;
  for (ValueId v : n.inputs) {
    const Node& c = g.node(v);
    const auto& d = *c.const_data();
    std::vector<int64_t> shape;
    if (!as_splat) shape = eval_shape(c.type.shape, {});
    std::vector<T> data(static_cast<size_t>(as_splat ? 1 : *numel_const(c.type.shape)));
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<T>(d.size() == 1 ? d[0] : d[i]);
    arrays.push_back(Array<T>{std::move(shape), std::make_shared<const std::vector<T>>(std::move(data))});
  }
  std::vector<const Array<T>*> ptrs;
  for (const auto& a : arrays) ptrs.push_back(&a);
  Node scalar_node = n;
  if (as_splat) scalar_node.type.shape.clear();
  Array<T> r = eval_node<T>(scalar_node, ptrs, {});
  std::vector<double> out(r.data->begin(), r.data->end());
  // Round to the node's dtype, as storing it would.
  if (n.type.dtype == DType::f32)
    for (double& x : out) x = static_cast<float>(x);
  return out;
}

bool wants_double(const Graph& g, const Node& n) {
  auto dbl = [](DType t) { return t == DType::f64 || !is_float(t); };
  if (dbl(n.type.dtype)) return true;
  for (ValueId v : n.inputs)
    if (dbl(g.type(v).dtype)) return true;
  return false;
}

}  // namespace

bool constant_fold(Graph& g, const PassOptions& o) {
  bool changed = false;
  Rewriter rw(g);
  g = rw.run([&](ValueId v) -> ValueId {
    const Node& n = g.node(v);
    if (n.def().category == OpCategory::source || n.def().category == OpCategory::control || n.inputs.empty()) return Rewriter::kCopy;
    int64_t in_elems = 0;
    bool all_splats = true;
    for (ValueId in : n.inputs) {
      const Node& c = rw.out().node(rw.map(in));
      if (c.op != Op::constant) return Rewriter::kCopy;
      in_elems += stored(c);
      all_splats &= is_splat_const(c);
    }
    auto out_elems = numel_const(n.type.shape);
    if (!out_elems) return Rewriter::kCopy;
    bool as_splat = all_splats && n.def().category == OpCategory::elementwise;
    if (!as_splat && (*out_elems > std::max<int64_t>(in_elems, 1) || *out_elems > o.max_fold_elements))
      return Rewriter::kCopy;
    // Evaluate on the new graph's constants (operands may themselves be folded).
    Node mapped = n;
    mapped.inputs = rw.map_all(n.inputs);
    std::vector<double> data = wants_double(g, n) ? evaluate<double>(rw.out(), mapped, as_splat)
                                                  : evaluate<float>(rw.out(), mapped, as_splat);
    changed = true;
    return rw.out().add_const(n.type, std::move(data));
  });
  return changed;
}

}  // namespace tj
