#include <cmath>

#include "ir/text.h"

namespace tj {

namespace {

std::string data_str(const Node& n) {
  const auto& d = *n.const_data();
  if (!is_float(n.type.dtype)) {
    auto one = [](double v) { return std::to_string(static_cast<int64_t>(v)); };
    if (d.size() == 1) return one(d[0]);
    std::string s = "[";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + one(d[i]);
    return s + "]";
  }
  return attr_str(AttrKind::Data, n.attrs[0]);
}

}  // namespace

std::string print_graph(const Graph& g) {
  std::vector<std::string> names(g.size());
  std::string out = "graph " + g.name() + "\n";
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op != Op::input && n.op != Op::param) continue;
    names[i] = "%" + n.name;
    out += std::string(n.def().name) + " " + names[i] + " : " + n.type.str() + "\n";
  }
  int next = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op == Op::input || n.op == Op::param) continue;
    names[i] = "%";
    names[i] += std::to_string(next++);
    out += names[i] + " = " + n.def().name;
    if (!n.inputs.empty()) {
      out += "(";
      for (size_t j = 0; j < n.inputs.size(); ++j) out += (j ? ", " : "") + names[static_cast<size_t>(n.inputs[j])];
      out += ")";
    }
    std::string attrs;
    const auto& specs = n.def().attrs;
    for (size_t j = 0; j < specs.size(); ++j) {
      if (specs[j].default_value && *specs[j].default_value == n.attrs[j]) continue;
      std::string v = n.op == Op::constant ? data_str(n) : attr_str(specs[j].kind, n.attrs[j]);
      attrs += (attrs.empty() ? "" : ", ") + std::string(specs[j].name) + "=" + v;
    }
    if (!attrs.empty()) out += " {" + attrs + "}";
    out += " : " + n.type.str() + "\n";
  }
  out += "return";
  for (size_t j = 0; j < g.outputs().size(); ++j)
    out += (j ? ", " : " ") + names[static_cast<size_t>(g.outputs()[j])];
  return out + "\n";
}

}  // namespace tj
