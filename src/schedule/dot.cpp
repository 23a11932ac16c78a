#include "schedule/dot.h"

namespace tj {

namespace {

std::string label(const Graph& g, ValueId v) {
  const Node& n = g.node(v);
  std::string name = n.name.empty() ? std::string(n.def().name) : n.name;
  return name + "\\n" + n.type.str();
}

}  // namespace

std::string schedule_dot(const Graph& g, const Schedule& s) {
  std::string d = "digraph \"" + g.name() + "\" {\n  rankdir=TB;\n  node [shape=box, fontsize=10, style=rounded];\n";
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    const Kernel& K = s.kernels[k];
    d += "  subgraph cluster_" + std::to_string(k) + " {\n    label=\"kernel " + std::to_string(k) + " (" +
         std::string(kernel_kind_name(K.kind)) + ")\";\n    style=filled; color=\"#dde6f0\";\n";
    for (ValueId v : K.ops) d += "    n" + std::to_string(v) + " [label=\"" + label(g, v) + "\"];\n";
    d += "  }\n";
  }
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (s.kernel_of[i] >= 0) continue;
    const char* shape = n.op == Op::input ? "ellipse" : n.op == Op::param || n.op == Op::constant ? "note" : "plain";
    d += "  n" + std::to_string(i) + " [label=\"" + label(g, static_cast<ValueId>(i)) + "\", shape=" + shape + "];\n";
  }
  for (size_t i = 0; i < g.size(); ++i)
    for (ValueId in : g.nodes()[i].inputs) d += "  n" + std::to_string(in) + " -> n" + std::to_string(i) + ";\n";
  return d + "}\n";
}

}  // namespace tj
