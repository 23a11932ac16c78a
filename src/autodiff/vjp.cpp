#include "autodiff/vjp.h"

#include <algorithm>

#include "ir/differ.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

// `d` summed over the dims broadcasting gave it beyond `to`, then cast to
// its dtype: a cotangent of an operand's type.
ValueId unbroadcast(Graph& g, ValueId d, const Type& to) {
  const size_t rank = to.shape.size();
  if (g.type(d).shape.size() > rank) {
    std::vector<int64_t> lead(g.type(d).shape.size() - rank);
    for (size_t i = 0; i < lead.size(); ++i) lead[i] = static_cast<int64_t>(i);
    d = g.add(Op::sum, {d}, {{"axes", lead}});
  }
  std::vector<int64_t> ones;
  for (size_t i = 0; i < rank; ++i)
    if (to.shape[i] == Dim(1) && g.type(d).shape[i] != Dim(1)) ones.push_back(static_cast<int64_t>(i));
  if (!ones.empty()) d = g.add(Op::sum, {d}, {{"axes", ones}, {"keepdim", true}});
  if (g.type(d).shape != to.shape) d = g.add(Op::reshape, {d}, {{"shape", to.shape}});
  if (g.type(d).dtype != to.dtype) d = g.add(Op::cast, {d}, {{"to", to.dtype}});
  return d;
}

std::string describe(const Graph& g, ValueId v) {
  const Node& n = g.node(v);
  return std::string(n.def().name) + " (value %" + std::to_string(v) + ", " + n.type.str() + ")";
}

// A region's backward (Differ::region_grad): vjp of its first output with
// respect to the inputs wanted, the forward's outputs dropped.
Region region_grad(const Graph& r, const std::vector<size_t>& inputs) {
  VjpSpec s;
  s.outputs = {0};
  const std::vector<ValueId> ins = r.inputs();
  for (size_t i : inputs) s.wrt.push_back(r.node(ins.at(i)).name);
  Vjp v = vjp(r, s);
  Graph& g = v.joint;
  g.set_outputs(std::vector<ValueId>(g.outputs().begin() + static_cast<std::ptrdiff_t>(v.forward_outputs), g.outputs().end()));
  g.set_name(r.name() + ".grad");
  return std::make_shared<const Graph>(std::move(g));
}

}  // namespace

Vjp vjp(const Graph& g, const VjpSpec& spec) {
  Vjp r{g, {}, {}, g.outputs().size()};
  Graph& j = r.joint;
  const size_t n = g.size();

  // What to differentiate with respect to.
  std::vector<ValueId> wrt;
  if (spec.wrt.empty()) {
    for (ValueId p : g.params())
      if (is_float(g.type(p).dtype)) wrt.push_back(p), r.wrt.push_back(g.node(p).name);
  } else {
    for (const std::string& name : spec.wrt) {
      ValueId v = g.find(name);
      if (v < 0) throw Error("vjp: '" + name + "' is not an input or param of " + g.name());
      if (!is_float(g.type(v).dtype)) throw Error("vjp: '" + name + "' is " + g.type(v).str() + ": only floating-point values have gradients");
      wrt.push_back(v), r.wrt.push_back(name);
    }
  }

  // Which values depend on them through floating-point values: the only
  // ones a cotangent reaches.
  std::vector<bool> needs(n, false);
  for (ValueId v : wrt) needs[static_cast<size_t>(v)] = true;
  for (size_t v = 0; v < n; ++v) {
    const Node& node = g.node(static_cast<ValueId>(v));
    if (needs[v] || !is_float(node.type.dtype)) continue;
    needs[v] = std::any_of(node.inputs.begin(), node.inputs.end(), [&](ValueId i) { return needs[static_cast<size_t>(i)]; });
  }

  // Seeds.
  std::vector<size_t> outs = spec.outputs;
  if (outs.empty())
    for (size_t k = 0; k < g.outputs().size(); ++k)
      if (is_float(g.type(g.outputs()[k]).dtype)) outs.push_back(k);
  std::vector<ValueId> ct(n, -1);
  auto accumulate = [&](ValueId v, ValueId d) {
    ValueId& c = ct[static_cast<size_t>(v)];
    c = c < 0 ? d : j.add(Op::add, {c, d});
  };
  for (size_t k : outs) {
    if (k >= g.outputs().size()) throw Error("vjp: output " + std::to_string(k) + " of " + std::to_string(g.outputs().size()));
    ValueId o = g.outputs()[k];
    const Type t = g.type(o);
    if (!is_float(t.dtype)) throw Error("vjp: output " + std::to_string(k) + " is " + t.str() + ": only floating-point outputs have cotangents");
    ValueId seed;
    if (spec.seed_ones) {
      if (numel(t.shape) != Dim(1)) throw Error("vjp: output " + std::to_string(k) + " is " + t.str() + ", not a scalar loss");
      seed = j.add(Op::expand, {j.add_const({t.dtype, {}}, std::vector<double>{1.0})}, {{"shape", t.shape}});
    } else {
      r.cotangents.push_back("d_out" + std::to_string(k));
      seed = j.add_input(r.cotangents.back(), t);
    }
    if (needs[static_cast<size_t>(o)]) accumulate(o, seed);
  }

  // Backward, last node first.
  for (size_t v = n; v-- > 0;) {
    const ValueId d_here = ct[v];
    const Node& node = g.node(static_cast<ValueId>(v));
    if (d_here < 0 || !needs[v] || node.op == Op::input || node.op == Op::param) continue;
    std::vector<bool> wanted(node.inputs.size());
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      ValueId x = node.inputs[i];
      wanted[i] = needs[static_cast<size_t>(x)] && is_float(g.type(x).dtype);
    }
    if (std::none_of(wanted.begin(), wanted.end(), [](bool b) { return b; })) continue;
    if (!node.def().grad) throw Unsupported("vjp: " + describe(g, static_cast<ValueId>(v)) + " is not differentiable, and a gradient asked for flows through it");
    Differ d{j, node, static_cast<ValueId>(v), d_here, wanted, {}, region_grad};
    node.def().grad(d);
    for (auto [i, dx] : d.given) {
      ValueId x = node.inputs[static_cast<size_t>(i)];
      accumulate(x, unbroadcast(j, dx, g.type(x)));
    }
  }

  std::vector<ValueId> outputs = g.outputs();
  for (ValueId w : wrt) {
    ValueId d = ct[static_cast<size_t>(w)];
    if (d < 0) d = j.add(Op::expand, {j.add_const({g.type(w).dtype, {}}, std::vector<double>{0.0})}, {{"shape", g.type(w).shape}});
    outputs.push_back(d);
  }
  j.set_outputs(outputs);
  return r;
}

}  // namespace tj
