#include "ir/graph.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <set>

#include "tensorjit/error.h"
#include "tensorjit/ndarray.h"

namespace tj {

std::string Type::str() const { return std::string(dtype_name(dtype)) + shape_str(shape); }

const Sharding* Graph::sharding(ValueId v) const {
  if (v < 0 || static_cast<size_t>(v) >= shardings_.size() || !shardings_[static_cast<size_t>(v)]) return nullptr;
  return &*shardings_[static_cast<size_t>(v)];
}

Sharding Graph::sharding_or_whole(ValueId v) const {
  if (const Sharding* s = sharding(v)) return *s;
  return Sharding{std::vector<std::vector<std::string>>(static_cast<size_t>(type(v).rank())), {}};
}

void Graph::set_sharding(ValueId v, Sharding s) {
  if (v < 0 || static_cast<size_t>(v) >= nodes_.size()) throw Error("set_sharding: no value %" + std::to_string(v));
  if (shardings_.size() <= static_cast<size_t>(v)) shardings_.resize(static_cast<size_t>(v) + 1);
  shardings_[static_cast<size_t>(v)] = std::move(s);
}

const AttrValue& Node::attr(std::string_view name) const {
  int i = attr_index(def(), name);
  if (i < 0) throw Error(std::string(def().name) + " has no attribute '" + std::string(name) + "'");
  return attrs[static_cast<size_t>(i)];
}

std::vector<AttrValue> Node::with_attr(std::string_view name, AttrValue value) const {
  int i = attr_index(def(), name);
  if (i < 0) throw Error(std::string(def().name) + " has no attribute '" + std::string(name) + "'");
  std::vector<AttrValue> a = attrs;
  a[static_cast<size_t>(i)] = std::move(value);
  return a;
}

ValueId Graph::push(Node n) {
  nodes_.push_back(std::move(n));
  return static_cast<ValueId>(nodes_.size() - 1);
}

ValueId Graph::add_input(std::string name, Type type) {
  if (find(name) >= 0) throw Error("duplicate input or param name '" + name + "'");
  return push(Node{Op::input, {}, {}, std::move(type), std::move(name)});
}

ValueId Graph::add_param(std::string name, Type type) {
  if (find(name) >= 0) throw Error("duplicate input or param name '" + name + "'");
  return push(Node{Op::param, {}, {}, std::move(type), std::move(name)});
}

ValueId Graph::add_const(Type type, const std::vector<double>& data) {
  DType t = type.dtype;
  return add_const(std::move(type), ConstValues::of(t, data));
}

ValueId Graph::add_const(Type type, ConstData data) {
  auto n = numel_const(type.shape);
  if (!n) throw Error("constant " + type.str() + " must have a concrete shape");
  if (!data || (data->size() != 1 && static_cast<int64_t>(data->size()) != *n))
    throw Error("constant " + type.str() + " has " + std::to_string(data ? data->size() : 0) + " values, expected 1 or " +
                std::to_string(*n));
  data = in_dtype(data, type.dtype);
  return push(Node{Op::constant, {}, {std::move(data)}, std::move(type), {}});
}

ValueId Graph::copy_const(const Node& n) {
  if (n.op != Op::constant) throw Error("copy_const: not a constant");
  return push(Node{Op::constant, {}, n.attrs, n.type, {}});
}

ValueId Graph::add(Op op, std::vector<ValueId> inputs, const NamedAttrs& named) {
  const OpDef& def = op_def(op);
  std::vector<std::optional<AttrValue>> slots(def.attrs.size());
  for (const auto& [name, value] : named) {
    int i = attr_index(def, name);
    if (i < 0) throw Error(std::string(def.name) + ": unknown attribute '" + name + "'");
    AttrValue v = value;
    // Accept an int where a dimension is expected, for convenience.
    if (def.attrs[static_cast<size_t>(i)].kind == AttrKind::DimK && std::holds_alternative<int64_t>(v))
      v = Dim(std::get<int64_t>(v));
    slots[static_cast<size_t>(i)] = std::move(v);
  }
  std::vector<AttrValue> attrs;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i]) attrs.push_back(std::move(*slots[i]));
    else if (def.attrs[i].default_value) attrs.push_back(*def.attrs[i].default_value);
    else throw Error(std::string(def.name) + ": missing attribute '" + def.attrs[i].name + "'");
  }
  return add_raw(op, std::move(inputs), std::move(attrs));
}

ValueId Graph::add_raw(Op op, std::vector<ValueId> inputs, std::vector<AttrValue> attrs) {
  const OpDef& def = op_def(op);
  if (attrs.size() != def.attrs.size()) throw Error(std::string(def.name) + ": wrong number of attributes");
  int nesting = nesting_;
  for (size_t i = 0; i < attrs.size(); ++i) {
    if (attrs[i].index() != static_cast<size_t>(def.attrs[i].kind))
      throw Error(std::string(def.name) + ": attribute '" + def.attrs[i].name + "' has the wrong kind");
    if (const auto* r = std::get_if<Region>(&attrs[i])) {
      if (!*r) throw Error(std::string(def.name) + ": attribute '" + def.attrs[i].name + "' is an empty region");
      nesting = std::max(nesting, (*r)->nesting() + 1);
    }
  }
  // Bounded nesting keeps every recursive walk over regions (verifying,
  // interpreting, compiling, destroying) within a small stack.
  if (nesting > kMaxRegionNesting) throw Error(std::string(def.name) + ": regions nested more than " + std::to_string(kMaxRegionNesting) + " deep");
  std::vector<Type> types;
  types.reserve(inputs.size());
  for (ValueId v : inputs) {
    if (v < 0 || static_cast<size_t>(v) >= nodes_.size()) throw Error(std::string(def.name) + ": operand is not defined");
    types.push_back(nodes_[static_cast<size_t>(v)].type);
  }
  if (op == Op::result) {  // its type is its producer's result `index`
    int64_t i = std::get<int64_t>(attrs[0]);
    Type t = result_type(*this, inputs[0], i);
    return push(Node{op, std::move(inputs), std::move(attrs), std::move(t), {}});
  }
  Type t = infer_type(op, types, attrs);
  nesting_ = nesting;
  return push(Node{op, std::move(inputs), std::move(attrs), std::move(t), {}});
}

std::vector<std::string> size_symbols(const Graph& g) {
  std::set<std::string> syms;
  for (const Node& n : g.nodes())
    for (const Dim& d : n.type.shape)
      for (const auto& x : d.symbols()) syms.insert(x);
  return {syms.begin(), syms.end()};
}

SymEnv size_hint(const Graph& g, SymEnv given, int64_t otherwise) {
  for (const auto& x : size_symbols(g)) given.emplace(x, otherwise);
  return given;
}

int64_t num_results(const Node& n) {
  if (n.op == Op::while_loop) return n.attr_int("carried");
  if (n.op == Op::cond) return static_cast<int64_t>(std::get<Region>(n.attr("then"))->outputs().size());
  return 1;
}

Type result_type(const Graph& g, ValueId producer, int64_t index) {
  const Node& p = g.node(producer);
  if (p.op != Op::while_loop && p.op != Op::cond) throw ShapeError("result: %" + std::to_string(producer) + " (" + p.def().name + ") has one result");
  if (index < 1 || index >= num_results(p))
    throw ShapeError("result: index " + std::to_string(index) + " out of range: " + p.def().name + " has " + std::to_string(num_results(p)) + " results");
  if (p.op == Op::while_loop) return g.type(p.inputs[static_cast<size_t>(index)]);
  const Graph& t = *std::get<Region>(p.attr("then"));
  return t.type(t.outputs()[static_cast<size_t>(index)]);
}

std::vector<ValueId> Graph::inputs() const {
  std::vector<ValueId> r;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].op == Op::input) r.push_back(static_cast<ValueId>(i));
  return r;
}

std::vector<ValueId> Graph::params() const {
  std::vector<ValueId> r;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].op == Op::param) r.push_back(static_cast<ValueId>(i));
  return r;
}

ValueId Graph::find(std::string_view name) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if ((nodes_[i].op == Op::input || nodes_[i].op == Op::param) && nodes_[i].name == name)
      return static_cast<ValueId>(i);
  return -1;
}

namespace {

// Shortest text that reads back to the same double.
std::string float_str(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  std::array<char, 32> buf;
  auto [p, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  std::string s(buf.data(), p);
  // Keep floats recognizable as floats: "2" -> "2.0".
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

template <class Seq, class F>
std::string list_str(const Seq& seq, F f) {
  std::string s = "[";
  bool first = true;
  for (const auto& x : seq) {
    if (!first) s += ", ";
    s += f(x);
    first = false;
  }
  return s + "]";
}

}  // namespace

std::string attr_str(AttrKind kind, const AttrValue& v) {
  switch (kind) {
    case AttrKind::Int: return std::to_string(std::get<int64_t>(v));
    case AttrKind::Float: return float_str(std::get<double>(v));
    case AttrKind::Bool: return std::get<bool>(v) ? "true" : "false";
    case AttrKind::Ints:
      return list_str(std::get<std::vector<int64_t>>(v), [](int64_t x) { return std::to_string(x); });
    case AttrKind::DimK: return std::get<Dim>(v).str();
    case AttrKind::Dims: return list_str(std::get<Shape>(v), [](const Dim& d) { return d.str(); });
    case AttrKind::DTypeK: return std::string(dtype_name(std::get<DType>(v)));
    case AttrKind::RegionK: return "@" + std::get<Region>(v)->name();
    case AttrKind::Data: {
      const auto& d = *std::get<ConstData>(v);
      if (d.size() == 1) return float_str(d[0]);
      std::vector<double> values(d.size());
      for (size_t i = 0; i < d.size(); ++i) values[i] = d[i];
      return list_str(values, float_str);
    }
  }
  return "?";
}

}  // namespace tj
