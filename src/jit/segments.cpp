// Graph breaks: a function that reads a tensor's value while it is traced
// runs as a sequence of graphs, each cut where a value is read.
#include "ir/extract.h"
#include "jit/jit_impl.h"
#include "tensorjit/error.h"

namespace tj::jitimpl {

// The graph of ops [start, end) computing `outs`; references to earlier
// values become inputs m0, m1, ... (`carried` lists their values).
Graph Segments::build(const std::vector<ValueId>& outs, std::vector<ValueId>* carried) {
  const Graph& G = st.tracer.graph();
  // One name: equal graphs print equal, and compile once.
  return extract_range(G, start, G.size(), outs, f.name + "_graph", [&](Graph& s, ValueId v) {
    const Node& n = G.node(v);
    if (n.op == Op::input) return s.add_input(n.name, n.type);
    if (n.op == Op::param) return s.add_param(n.name, n.type);
    if (n.op == Op::constant) return s.copy_const(n);
    if (static_cast<size_t>(v) >= start) throw Error("jit: internal: value %" + std::to_string(v) + " used before it is defined");
    carried->push_back(v);  // named by order, so each iteration of a loop prints the same
    return s.add_input("m" + std::to_string(carried->size() - 1), n.type);
  });
}

// Runs the ops since the last cut; `outs` (values of this segment) are kept.
void Segments::run(const std::vector<ValueId>& outs) {
  std::vector<ValueId> carried;
  Graph g = build(outs, &carried);
  auto prog = f.program_for(std::move(g), st.params);
  // A graph that writes a cache in place would change a value that later
  // code may still read (a live proxy, the caller's array): it gets copies.
  bool writes = false;
  for (const Node& n : prog->graph.nodes()) writes |= n.op == Op::kv_write;
  Bindings in;
  for (ValueId v : prog->graph.inputs()) {  // sizes first: the arrays they read move below
    const std::string& n = prog->graph.node(v).name;
    if (auto size = real_size(n)) in[n] = NDArray::scalar(DType::i64, static_cast<double>(*size));
  }
  // Each input is a tensor argument (by its name) or a carried value (in order).
  std::map<std::string, NDArray*, std::less<>> sources;
  size_t next_carried = 0;
  for (ValueId v : prog->graph.inputs()) {
    const std::string& n = prog->graph.node(v).name;
    if (auto t = st.tensor_inputs.find(n); t != st.tensor_inputs.end()) sources[n] = &tensors[t->second];
    else if (!real_size(n)) sources[n] = &values.at(carried.at(next_carried++));
  }
  auto source = [&](const std::string& n) -> NDArray& { return *sources.at(n); };
  for (ValueId v : prog->graph.inputs()) {
    const std::string& n = prog->graph.node(v).name;
    if (in.count(n)) continue;
    in[n] = writes ? source(n) : std::move(source(n));
  }
  auto hand_back = [&] {
    if (writes) return;
    for (auto& [n, a] : in)
      if (!is_size_input(n)) source(n) = std::move(a);
  };
  std::vector<NDArray> out;
  try {
    out = prog->run(in);
  } catch (...) {
    hand_back();
    throw;
  }
  hand_back();
  for (size_t i = 0; i < outs.size(); ++i) values[outs[i]] = std::move(out[i]);
  ++f.stats.graphs_run;
  start = st.tracer.graph().size();
}

bool Segments::is_size_input(const std::string& input) const {
  for (const auto& [n, site] : st.real_sizes)
    if (n == input) return true;
  return false;
}

// The size a real_size() input stands for, if `input` is one.
std::optional<int64_t> Segments::real_size(const std::string& input) const {
  for (const auto& [n, site] : st.real_sizes)
    if (n == input) return tensors[site.first].shape()[static_cast<size_t>(site.second)];
  return std::nullopt;
}

NDArray Segments::value_of(ValueId v) {
  const Graph& G = st.tracer.graph();
  const Node& n = G.node(v);
  if (auto size = real_size(n.name); n.op == Op::input && size) return NDArray::scalar(DType::i64, static_cast<double>(*size));
  if (n.op == Op::input) return tensors[st.tensor_inputs.at(n.name)];
  if (n.op == Op::param) return st.params.at(n.name);
  if (n.op == Op::constant) return n.const_data()->to_array(eval_shape(n.type.shape, {}));
  if (auto it = values.find(v); it != values.end()) return it->second;
  // Cut here: everything live in this segment is kept.
  std::vector<ValueId> outs{v};
  for (size_t i = start; i < G.size(); ++i) {
    const Node& m = G.nodes()[i];
    bool data = m.op != Op::input && m.op != Op::param && m.op != Op::constant;
    if (data && static_cast<ValueId>(i) != v && st.tracer.holders(static_cast<ValueId>(i)) > 0) outs.push_back(static_cast<ValueId>(i));
  }
  run(outs);
  return values.at(v);
}

double Segments::read(const Tensor& t, const std::source_location& where) {
  if (st.symbolic()) throw RestartStatic{"a graph break", true};
  const Node& n = st.tracer.graph().node(t.id());
  if (eval_shape(n.type.shape, {}).size() != 0 && numel(n.type.shape) != Dim(1))
    throw Error("item() of a tensor of " + n.type.str() + ": only one element can be read");
  ++breaks;
  ++f.stats.graph_breaks;
  // Where (break_sites, with the C++ source location) and what (the note:
  // a caller with locations of its own, as the Python binding, lists those).
  const std::string what = "item() of " + std::string(n.def().name) + " -> " + n.type.str();
  if (f.break_sites[std::string(where.file_name()) + ":" + std::to_string(where.line()) + ": " + what]++ == 0)
    f.note("call " + std::to_string(f.stats.calls) + ": graph break " + std::to_string(breaks) + ": " + what + " (%" + std::to_string(t.id()) + ")");
  NDArray a = value_of(t.id());
  return a.to_vector().at(0);
}

// The function's outputs after the last cut.
std::vector<NDArray> Segments::finish(const std::vector<Tensor>& outs) {
  std::vector<ValueId> pending;
  for (const Tensor& t : outs) {
    const Node& n = st.tracer.graph().node(t.id());
    bool data = n.op != Op::input && n.op != Op::param && n.op != Op::constant;
    if (data && static_cast<size_t>(t.id()) >= start) pending.push_back(t.id());
  }
  if (!pending.empty()) run(pending);
  std::vector<NDArray> r;
  for (const Tensor& t : outs) r.push_back(value_of(t.id()));
  return r;
}

}  // namespace tj::jitimpl
