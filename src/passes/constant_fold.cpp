// constant_fold: a node whose operands are all constants is evaluated now,
// with the interpreter's own kernels, and replaced by a constant.
// Evaluation happens in the node's precision (f32, bf16, f16 nodes in float;
// f64, integer and bool nodes in double), so the folded graph interpreted in
// its own dtypes gives bit-identical results. Elementwise ops and views
// (expand, reshape, ...) on splats fold to a splat. A fold that would grow the data (iota, causal_mask, expand,
// outer products) is left to run time: it would only add memory traffic. A small window op of constants (an
// average pool's window counts) is folded: at run time it would be a kernel of its own every call.
#include <cstring>
#include <numeric>

#include "ir/rewriter.h"
#include "passes/passes.h"
#include "reference/kernels.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

constexpr int64_t kWindowTableElements = int64_t{1} << 16;

int64_t stored(const Node& n) { return static_cast<int64_t>(n.const_data()->size()); }

bool is_splat_const(const Node& n) { return n.op == Op::constant && n.const_data()->size() == 1; }

// The dtype whose values T holds exactly as stored (f32 for float).
template <class T>
constexpr DType native = std::is_same_v<T, float> ? DType::f32 : DType::f64;

// The node evaluated on its constant operands; nullptr when an integer
// result is not exact as a double (the reference kernels' integers pass
// through doubles here). Operands and results in T's own dtype are copied
// as bytes: folding the norm weights into 176 MB of matmul weights must not
// go through 8-byte doubles per value.
template <class T>
ConstData evaluate(const Graph& g, const Node& n, bool as_splat) {
  std::vector<Value<T>> values;
  for (ValueId v : n.inputs) {
    const Node& c = g.node(v);
    const ConstValues& d = *c.const_data();
    std::vector<int64_t> shape;
    if (!as_splat) shape = eval_shape(c.type.shape, {});
    size_t count = static_cast<size_t>(as_splat ? 1 : *numel_const(c.type.shape));
    auto at = [&](size_t i) { return d.size() == 1 ? d[0] : d[i]; };
    if (is_float(c.type.dtype)) {
      std::vector<T> data(count);
      if (d.dtype() == native<T> && d.size() == count) { if (count) std::memcpy(data.data(), d.raw(), count * sizeof(T)); }
      else for (size_t i = 0; i < count; ++i) data[i] = static_cast<T>(at(i));
      values.push_back({Array<T>{std::move(shape), std::make_shared<const std::vector<T>>(std::move(data))}});
    } else {  // exactly: INT64_MAX is 2^63 as a double, which no int64 holds
      std::vector<int64_t> data(count);
      for (size_t i = 0; i < count; ++i) data[i] = d.int_at(d.size() == 1 ? 0 : i);
      values.push_back({Array<int64_t>{std::move(shape), std::make_shared<const std::vector<int64_t>>(std::move(data))}});
    }
  }
  std::vector<const Value<T>*> ptrs;
  for (const auto& a : values) ptrs.push_back(&a);
  Node scalar_node = n;
  if (as_splat) scalar_node.type.shape.clear();
  Value<T> r = eval_node<T>(scalar_node, ptrs, {});
  values.clear();
  if (r.is_int()) {
    std::vector<double> out;
    for (int64_t x : *r.template as<int64_t>().data) {
      if (static_cast<long double>(static_cast<double>(x)) != static_cast<long double>(x)) return nullptr;
      out.push_back(static_cast<double>(x));
    }
    return ConstValues::of(n.type.dtype, out);
  }
  const auto& f = *r.template as<T>().data;
  NDArray a(n.type.dtype, {static_cast<int64_t>(f.size())});
  if (n.type.dtype == native<T>) { if (!f.empty()) std::memcpy(a.raw(), f.data(), f.size() * sizeof(T)); }
  else for (size_t i = 0; i < f.size(); ++i) a.set(static_cast<int64_t>(i), static_cast<double>(f[i]));  // rounded, as storing it would
  return ConstValues::adopt(std::move(a));
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
    if (all_splats && n.def().category == OpCategory::view) {  // a view of a splat is the same splat, any shape
      changed = true;
      return rw.out().add_const(n.type, rw.out().node(rw.map(n.inputs[0])).const_data());
    }
    bool as_splat = all_splats && n.def().category == OpCategory::elementwise;
    // A window op of constants (an average pool's window counts: a sum_pool
    // of ones) grows a little and saves a kernel a call: folded up to 64K.
    const bool window_table = n.def().fuse == Fuse::conv && *out_elems <= kWindowTableElements;
    if (!as_splat && ((*out_elems > std::max<int64_t>(in_elems, 1) && !window_table) || *out_elems > o.max_fold_elements))
      return Rewriter::kCopy;
    // Evaluate on the new graph's constants (operands may themselves be folded).
    Node mapped = n;
    mapped.inputs = rw.map_all(n.inputs);
    ConstData data;
    try {
      data = wants_double(g, n) ? evaluate<double>(rw.out(), mapped, as_splat) : evaluate<float>(rw.out(), mapped, as_splat);
    } catch (const Error&) {  // e.g. an integer division by zero: an error when (and if) it runs
      return Rewriter::kCopy;
    }
    if (!data) return Rewriter::kCopy;  // an integer a double cannot hold: computed at run time
    changed = true;
    return rw.out().add_const(n.type, std::move(data));
  });
  return changed;
}

}  // namespace tj
