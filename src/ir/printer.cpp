#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>

#include <xxhash.h>

#include "ir/text.h"

namespace tj {

namespace {

// Integers print as integers, exactly (not through a double); f32/bf16/f16
// values as the shortest text that reads back to the same float (the parser
// rounds constants to their dtype).
std::string value_str(const ConstValues& d, size_t i, DType t) {
  if (!is_float(t)) return std::to_string(d.int_at(i));  // the data is in the node's dtype (Graph::add_const)
  double v = d[i];
  if (t == DType::f64 || !std::isfinite(v)) return attr_str(AttrKind::Float, v);
  std::array<char, 32> buf;
  auto [p, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), static_cast<float>(v));
  std::string s(buf.data(), p);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string data_str(const Node& n, const PrintOptions& o) {
  const auto& d = *n.const_data();
  if (d.size() == 1) return value_str(d, 0, n.type.dtype);
  if (d.size() > o.summarize_constants_over) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "<%zu values, xxh3 %016llx>", d.size(),
                  static_cast<unsigned long long>(XXH3_64bits(d.raw(), d.nbytes())));
    return buf;
  }
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + value_str(d, i, n.type.dtype);
  return s + "]";
}

}  // namespace

namespace {

// The regions `g` uses, each once, every region after the regions it uses
// (a post-order walk with an explicit stack: any depth of nesting prints).
void collect_regions(const Graph& g, std::vector<const Graph*>* out) {
  struct Frame {
    const Graph* g;
    size_t node = 0, attr = 0;
  };
  std::set<const Graph*> seen{&g};
  std::vector<Frame> stack{{&g}};
  while (!stack.empty()) {
    Frame& f = stack.back();
    const Graph* next = nullptr;
    for (; f.node < f.g->size() && !next; ++f.node, f.attr = 0) {
      const Node& n = f.g->nodes()[f.node];
      for (; f.attr < n.attrs.size() && !next; ++f.attr)
        if (const auto* r = std::get_if<Region>(&n.attrs[f.attr]); r && *r && seen.insert(r->get()).second) next = r->get();
      if (next) break;
    }
    if (next) {
      stack.push_back({next});
      continue;
    }
    if (f.g != &g) out->push_back(f.g);
    stack.pop_back();
  }
}

std::string print_one(const Graph& g, const PrintOptions& o);

}  // namespace

std::vector<std::string> printed_names(const Graph& g) {
  std::vector<std::string> names(g.size());
  int next = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    names[i] = (n.op == Op::input || n.op == Op::param) ? "%" + n.name : "%" + std::to_string(next++);
  }
  return names;
}

std::string print_graph(const Graph& g, const PrintOptions& o) {
  std::vector<const Graph*> regions;
  collect_regions(g, &regions);
  std::string out;
  for (const Graph* r : regions) out += print_one(*r, o) + "\n";
  return out + print_one(g, o);
}

namespace {

std::string print_one(const Graph& g, const PrintOptions& o) {
  const std::vector<std::string> names = printed_names(g);
  std::string out = "graph " + g.name() + "\n";
  if (!g.mesh().empty()) out += "mesh " + g.mesh().str() + "\n";
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op != Op::input && n.op != Op::param) continue;
    out += std::string(n.def().name) + " " + names[i] + " : " + sharded_type_str(n.type, g.sharding(static_cast<ValueId>(i))) + "\n";
  }
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op == Op::input || n.op == Op::param) continue;
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
      std::string v = n.op == Op::constant ? data_str(n, o) : attr_str(specs[j].kind, n.attrs[j]);
      attrs += (attrs.empty() ? "" : ", ") + std::string(specs[j].name) + "=" + v;
    }
    if (!attrs.empty()) out += " {" + attrs + "}";
    out += " : " + sharded_type_str(n.type, g.sharding(static_cast<ValueId>(i))) + "\n";
  }
  out += "return";
  for (size_t j = 0; j < g.outputs().size(); ++j)
    out += (j ? ", " : " ") + names[static_cast<size_t>(g.outputs()[j])];
  return out + "\n";
}

}  // namespace

}  // namespace tj
