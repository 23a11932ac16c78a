#include "ir/rewriter.h"

#include <cmath>

namespace tj {

std::vector<ValueId> Rewriter::map_all(const std::vector<ValueId>& vs) const {
  std::vector<ValueId> r;
  r.reserve(vs.size());
  for (ValueId v : vs) r.push_back(map(v));
  return r;
}

ValueId Rewriter::copy(ValueId v) {
  const Node& n = old_.node(v);
  switch (n.op) {
    case Op::input: return out_.add_input(n.name, n.type);
    case Op::param: return out_.add_param(n.name, n.type);
    case Op::constant: return out_.copy_const(n);
    default: return out_.add_raw(n.op, map_all(n.inputs), n.attrs);
  }
}

Graph Rewriter::run(const std::function<ValueId(ValueId)>& f) {
  for (size_t i = 0; i < old_.size(); ++i) {
    ValueId v = static_cast<ValueId>(i);
    const Node& n = old_.node(v);
    ValueId r = (n.op == Op::input || n.op == Op::param) ? kCopy : f(v);
    if (r == kDrop) continue;
    map_[i] = r >= 0 ? r : copy(v);
  }
  out_.set_outputs(map_all(old_.outputs()));
  return std::move(out_);
}

std::vector<std::vector<ValueId>> users_of(const Graph& g) {
  std::vector<std::vector<ValueId>> u(g.size());
  for (size_t i = 0; i < g.size(); ++i)
    for (ValueId v : g.nodes()[i].inputs) u[static_cast<size_t>(v)].push_back(static_cast<ValueId>(i));
  for (ValueId v : g.outputs()) u[static_cast<size_t>(v)].push_back(-1);
  return u;
}

std::vector<bool> live_values(const Graph& g) {
  std::vector<bool> live(g.size(), false);
  for (ValueId v : g.outputs()) live[static_cast<size_t>(v)] = true;
  for (size_t i = g.size(); i-- > 0;)
    if (live[i])
      for (ValueId v : g.nodes()[i].inputs) live[static_cast<size_t>(v)] = true;
  return live;
}

bool is_constant(const Graph& g, ValueId v) { return g.node(v).op == Op::constant; }

bool is_weight_matrix(const Graph& g, ValueId v) {
  const Node& n = g.node(v);
  return n.op == Op::constant && n.type.rank() == 2 && n.type.shape[0].is_const() && n.type.shape[1].is_const() &&
         n.const_data()->size() > 1;  // a splat stays a splat
}

std::optional<double> splat_value(const Graph& g, ValueId v) {
  const Node& n = g.node(v);
  if (n.op != Op::constant || n.const_data()->size() != 1) return std::nullopt;
  return (*n.const_data())[0];
}

bool is_splat(const Graph& g, ValueId v, double x) {
  const Node& n = g.node(v);
  if (n.op != Op::constant) return false;
  const ConstValues& c = *n.const_data();
  for (size_t i = 0; i < c.size(); ++i)
    if (double d = c[i]; d != x || std::signbit(d) != std::signbit(x)) return false;
  return true;
}

}  // namespace tj
