#include "passes/specialize.h"

#include <variant>

namespace tj {

namespace {

Shape eval_dims(const Shape& s, const SymEnv& env) {
  Shape r;
  r.reserve(s.size());
  for (const Dim& d : s) r.push_back(Dim(d.eval(env)));
  return r;
}

}  // namespace

Graph specialize(const Graph& g, const SymEnv& env) {
  Graph out(g.name());
  for (const Node& n : g.nodes()) {
    Type t{n.type.dtype, eval_dims(n.type.shape, env)};
    switch (n.op) {
      case Op::input: out.add_input(n.name, t); continue;
      case Op::param: out.add_param(n.name, t); continue;
      case Op::constant: out.add_const(t, n.const_data()); continue;
      default: break;
    }
    std::vector<AttrValue> attrs = n.attrs;
    for (AttrValue& a : attrs) {
      if (auto* d = std::get_if<Dim>(&a)) *d = Dim(d->eval(env));
      else if (auto* s = std::get_if<Shape>(&a)) *s = eval_dims(*s, env);
    }
    out.add_raw(n.op, n.inputs, std::move(attrs));
  }
  out.set_outputs(g.outputs());
  return out;
}

}  // namespace tj
