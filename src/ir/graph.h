// The SSA graph IR. A graph is a list of nodes in topological order; node i
// defines value i, exactly once. Graph inputs are `input` (runtime data) or
// `param` (weights, which passes may freeze into constants); constants carry
// their data. Every node's type is computed by the op table's inference when
// the node is added, so a graph that was built is a graph that type-checks.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/constant.h"
#include "ir/op.h"
#include "ir/sharding.h"

namespace tj {

using ValueId = int32_t;

// How deep regions (subgraphs of control-flow ops) may nest: the parser and
// the verifier refuse deeper graphs, so that everything that walks regions
// recursively has a bounded stack.
constexpr int kMaxRegionNesting = 64;

struct Node {
  Op op;
  std::vector<ValueId> inputs;
  std::vector<AttrValue> attrs;  // one per entry of op_def(op).attrs, defaults filled in
  Type type;
  std::string name;  // inputs and params only

  const OpDef& def() const { return op_def(op); }
  const AttrValue& attr(std::string_view name) const;
  int64_t attr_int(std::string_view name) const { return std::get<int64_t>(attr(name)); }
  double attr_float(std::string_view name) const { return std::get<double>(attr(name)); }
  bool attr_bool(std::string_view name) const { return std::get<bool>(attr(name)); }
  const std::vector<int64_t>& attr_ints(std::string_view name) const {
    return std::get<std::vector<int64_t>>(attr(name));
  }
  const Dim& attr_dim(std::string_view name) const { return std::get<Dim>(attr(name)); }
  const Shape& attr_dims(std::string_view name) const { return std::get<Shape>(attr(name)); }
  DType attr_dtype(std::string_view name) const { return std::get<DType>(attr(name)); }
  const ConstData& const_data() const { return std::get<ConstData>(attrs[0]); }
  // The attributes with `name` set to `value`, for a rewritten twin.
  std::vector<AttrValue> with_attr(std::string_view name, AttrValue value) const;
};

// Attributes by name, for building nodes: {{"axis", int64_t{1}}, {"keepdim", true}}.
using NamedAttrs = std::vector<std::pair<std::string, AttrValue>>;

class Graph {
 public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}

  ValueId add_input(std::string name, Type type);
  ValueId add_param(std::string name, Type type);
  // Values rounded to the type's dtype; size 1 (splat) or numel.
  ValueId add_const(Type type, const std::vector<double>& data);
  // Data in another dtype than the type's is converted (rounded); data in
  // the type's dtype is shared as it is.
  ValueId add_const(Type type, ConstData data);
  // A constant node copied from another graph, sharing its data.
  ValueId copy_const(const Node& n);
  // Adds a computed node; runs inference, throws ShapeError naming the op and
  // the operand types when they do not fit.
  ValueId add(Op op, std::vector<ValueId> inputs, const NamedAttrs& attrs = {});
  // The same with attributes already in schema order (the parser's path).
  ValueId add_raw(Op op, std::vector<ValueId> inputs, std::vector<AttrValue> attrs);

  void set_outputs(std::vector<ValueId> outs) { outputs_ = std::move(outs); }
  const std::vector<ValueId>& outputs() const { return outputs_; }

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(ValueId v) const { return nodes_.at(static_cast<size_t>(v)); }
  const Type& type(ValueId v) const { return node(v).type; }
  size_t size() const { return nodes_.size(); }
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  std::vector<ValueId> inputs() const;  // `input` nodes, in order
  std::vector<ValueId> params() const;  // `param` nodes, in order
  ValueId find(std::string_view input_or_param_name) const;  // -1 if none
  // The devices the graph runs over and how its values lie on them
  // (ir/sharding.h): no mesh, every value unannotated, by default. The
  // sharding of a value the graph lacks, or of one not annotated, is null.
  const Mesh& mesh() const { return mesh_; }
  void set_mesh(Mesh m) { mesh_ = std::move(m); }
  const Sharding* sharding(ValueId v) const;
  // v's sharding, or, where it has none, one with every dim whole and
  // nothing partial (what a pass starts a value from).
  Sharding sharding_or_whole(ValueId v) const;
  void set_sharding(ValueId v, Sharding s);
  // 1 for a graph without regions, else 1 + the deepest region's nesting;
  // adding a node that would make it exceed kMaxRegionNesting throws.
  int nesting() const { return nesting_; }

 private:
  ValueId push(Node n);
  std::string name_;
  int nesting_ = 1;
  std::vector<Node> nodes_;
  std::vector<ValueId> outputs_;
  Mesh mesh_;
  std::vector<std::optional<Sharding>> shardings_;  // by value; shorter than nodes_ when the last ones have none
};

// Runs an op's inference on given operand types; the entry point shared by
// Graph::add, the verifier and (later) passes that want to check a rewrite.
Type infer_type(Op op, const std::vector<Type>& operand_types, std::vector<AttrValue>& attrs);

std::string attr_str(AttrKind kind, const AttrValue& v);

// Multi-result ops (while_loop, cond): how many results; the type of result
// `index` (>= 1) of `producer`, read through a `result` node.
int64_t num_results(const Node& n);

// The size symbols in g's types, sorted.
std::vector<std::string> size_symbols(const Graph& g);
// `given` with every size symbol of g bound; a symbol not given is `otherwise`
// (the typical size that choices such as running in parallel are made at).
SymEnv size_hint(const Graph& g, SymEnv given, int64_t otherwise = 64);
Type result_type(const Graph& g, ValueId producer, int64_t index);

}  // namespace tj
