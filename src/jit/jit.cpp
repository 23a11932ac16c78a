#include "tensorjit/jit.h"
#include "tensorjit/safetensors.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "ir/extract.h"
#include "ir/text.h"
#include "jit/guards.h"
#include "jit/padding.h"
#include "jit/specialize.h"
#include "runtime/executable.h"
#include "runtime/interpreter.h"
#include "support/log.h"
#include "tensorjit/error.h"

namespace tj {

int64_t Buckets::of(int64_t size) const {
  if (multiple > 0) return (size + multiple - 1) / multiple * multiple;
  int64_t b = 1;
  while (b < size) b *= 2;
  return b;
}

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string tensor_name(size_t i) { return "t" + std::to_string(i); }

// One graph, compiled (or on the interpreter), with the weights it holds.
struct Program {
  Graph graph;
  Bindings params;
  std::optional<Executable> exe;
  DType compute = DType::f32;

  Program(Graph g, Bindings p, bool compile, const SymEnv& size_hint = {}) : graph(std::move(g)), params(std::move(p)) {
    bool f64 = true;
    for (const Node& n : graph.nodes()) f64 &= !is_float(n.type.dtype) || n.type.dtype == DType::f64;
    compute = f64 ? DType::f64 : DType::f32;
    CompileOptions co;
    co.size_hint = size_hint;
    if (compile) exe = Executable::compile(graph, params, co);
  }
  std::vector<NDArray> run(Bindings& inputs, const RunOptions& o = {}) {
    if (exe) {
      std::vector<NDArray> out;
      exe->run(inputs, out, o);
      return out;
    }
    Bindings all = params;
    for (auto& [k, v] : inputs) all[k] = v;
    return interpret(graph, all, {compute});
  }
};

// The policy options give one dim.
DynamicPolicy policy_of(const JitOptions& o, size_t tensor, int axis) {
  DynamicPolicy p = o.policy;
  for (const DimPolicy& d : o.dims)
    if (d.tensor == tensor && d.axis == axis) p = d.policy;
  return p;
}

// Thrown out of a trace that met a graph break while holding bucketed
// (symbolic) dims: the function is traced again with static shapes.
struct RestartStatic {
  std::string why;
  bool breaks = false;
};

}  // namespace

// ---- the trace's view of the arguments ---------------------------------------

struct Segments;

struct JitArgs::State {
  Tracer tracer;
  const std::vector<NDArray>& tensors;
  const std::vector<JitValue>& values;
  std::vector<std::optional<Tensor>> proxies;
  std::vector<Shape> dims;  // per tensor, as traced: sizes, or bucket symbols
  std::map<std::string, std::pair<size_t, int>> symbol_site;  // symbol -> first (tensor, axis)
  std::map<std::string, int64_t> bucket_of;                   // symbol -> its bucket
  std::set<size_t> values_read;
  Bindings params;
  std::vector<std::pair<std::string, std::pair<size_t, int>>> real_sizes;  // input name -> (tensor, axis)
  Segments* segments = nullptr;

  // `dynamic`: the automatic dims that have shown a second value; `symbolic`:
  // false traces every dim static (a function that breaks the graph).
  State(const std::string& name, const std::vector<NDArray>& ts, const std::vector<JitValue>& vs, const JitOptions& o, bool symbolic,
        const std::set<std::pair<size_t, int>>& dynamic)
      : tracer(name), tensors(ts), values(vs), proxies(ts.size()) {
    // The policy of each dim; any symbolic dim makes the bucketed ones
    // symbolic too (a graph for every size needs no padding).
    std::vector<std::vector<DynamicPolicy>> policy(ts.size());
    bool any_symbolic = false;
    for (size_t i = 0; i < ts.size(); ++i)
      for (int a = 0; a < static_cast<int>(ts[i].shape().size()); ++a) {
        DynamicPolicy p = policy_of(o, i, a);
        if (p == DynamicPolicy::automatic) p = dynamic.count({i, a}) ? DynamicPolicy::symbolic : DynamicPolicy::static_shapes;
        if (!symbolic || ts[i].shape()[static_cast<size_t>(a)] < 2) p = DynamicPolicy::static_shapes;  // 0 and 1 are specialized
        any_symbolic |= p == DynamicPolicy::symbolic;
        policy[i].push_back(p);
      }
    std::map<int64_t, std::string> by_size;  // duck sizing: equal sizes share a symbol
    for (size_t i = 0; i < ts.size(); ++i) {
      Shape s;
      for (int a = 0; a < static_cast<int>(ts[i].shape().size()); ++a) {
        int64_t v = ts[i].shape()[static_cast<size_t>(a)];
        DynamicPolicy p = policy[i][static_cast<size_t>(a)];
        if (p == DynamicPolicy::static_shapes) {
          s.push_back(Dim(v));
          continue;
        }
        auto [it, fresh] = by_size.emplace(v, (any_symbolic ? "d" : "s") + std::to_string(by_size.size()));
        if (fresh) {
          symbol_site[it->second] = {i, a};
          if (!any_symbolic) bucket_of[it->second] = o.buckets.of(v);
        }
        s.push_back(Dim::symbol(it->second));
      }
      dims.push_back(std::move(s));
    }
  }
  bool bucketed() const { return !bucket_of.empty(); }
  bool symbolic() const { return !symbol_site.empty(); }
};

Tensor JitArgs::tensor(size_t i) {
  if (i >= s_->tensors.size())
    throw Error("jit: the function reads tensor " + std::to_string(i) + " but the call passed " + std::to_string(s_->tensors.size()));
  auto& p = s_->proxies[i];
  if (!p) p = s_->tracer.input(tensor_name(i), s_->tensors[i].dtype(), s_->dims[i]);
  return *p;
}

namespace {
const JitValue& value_at(const JitArgs::State& s, size_t i) {
  if (i >= s.values.size())
    throw Error("jit: the function reads plain value " + std::to_string(i) + " but the call passed " + std::to_string(s.values.size()));
  return s.values[i];
}
}  // namespace

int64_t JitArgs::integer(size_t i) {
  const JitValue& v = value_at(*s_, i);
  s_->values_read.insert(i);
  if (auto* x = std::get_if<int64_t>(&v)) return *x;
  if (auto* b = std::get_if<bool>(&v)) return *b;
  throw Error("jit: plain value " + std::to_string(i) + " is a double, read as an integer");
}

double JitArgs::number(size_t i) {
  const JitValue& v = value_at(*s_, i);
  s_->values_read.insert(i);
  if (auto* x = std::get_if<double>(&v)) return *x;
  if (auto* x = std::get_if<int64_t>(&v)) return static_cast<double>(*x);
  return std::get<bool>(v);
}

bool JitArgs::flag(size_t i) {
  const JitValue& v = value_at(*s_, i);
  s_->values_read.insert(i);
  if (auto* b = std::get_if<bool>(&v)) return *b;
  if (auto* x = std::get_if<int64_t>(&v)) return *x != 0;
  return std::get<double>(v) != 0;
}

Tensor JitArgs::real_size(size_t i, int axis) {
  if (i >= s_->tensors.size()) throw Error("jit: real_size of tensor " + std::to_string(i) + ": no such tensor");
  int r = static_cast<int>(s_->dims[i].size());
  if (axis < -r || axis >= r) throw Error("jit: real_size: axis " + std::to_string(axis) + " out of range");
  if (axis < 0) axis += r;
  std::string name = tensor_name(i) + "_size" + std::to_string(axis);
  for (const auto& [n, site] : s_->real_sizes)
    if (n == name) return {&s_->tracer, s_->tracer.graph().find(name)};
  s_->real_sizes.push_back({name, {i, axis}});
  return s_->tracer.input(name, DType::i64, {});
}

Tensor JitArgs::param(const std::string& name, const NDArray& value) {
  if (s_->params.count(name)) return {&s_->tracer, s_->tracer.graph().find(name)};
  s_->params[name] = value;
  Shape s(value.shape().begin(), value.shape().end());
  return s_->tracer.param(name, value.dtype(), s);
}

Tensor JitArgs::param(const std::string& name, const SafetensorsFile& weights) {
  if (s_->params.count(name)) return {&s_->tracer, s_->tracer.graph().find(name)};
  return param(name, weights.read(name));
}

Tracer& JitArgs::tracer() { return s_->tracer; }

// ---- the function --------------------------------------------------------------

struct Entry {
  int id = 0;
  int64_t compiled_at = 0;  // call number
  Guards guards;
  std::shared_ptr<Program> program;
  std::vector<bool> used;                          // per tensor: a graph input
  std::vector<std::vector<int64_t>> padded;        // per tensor: its compiled shape
  std::vector<bool> pads;                          // per tensor: padded to a bucket
  std::vector<NDArray> buffers;                    // per padded tensor, reused
  std::vector<std::pair<std::string, std::pair<size_t, int>>> real_sizes;
  std::map<std::string, std::pair<size_t, int>> symbols;  // to evaluate output shapes at real sizes
  std::vector<Shape> output_dims;
  std::vector<int> input_tensor;  // per input of the compiled graph: the tensor it is, or -1 (a real size)
};

struct JitFunction::Impl {
  std::string name;
  JitFn fn;
  JitOptions o;
  std::vector<Entry> entries;
  JitStats stats;
  std::vector<std::string> log;  // recompilations, first graph break at each site, the cache limit
  int64_t dropped = 0;           // notes past the log's bound
  std::map<std::string, int64_t> break_sites;  // where item() broke the graph, and how often
  void note(std::string line) {
    if (log.size() < 100) log.push_back(std::move(line));
    else ++dropped;
  }
  bool breaking = false;         // the function reads values: traced on every call
  bool warned_limit = false;
  std::map<std::string, std::shared_ptr<Program>> graphs;  // a breaking function's graphs, by text

  std::vector<NDArray> call(std::vector<NDArray>& ts, const std::vector<JitValue>& vs);
  std::vector<NDArray> run_entry(Entry& e, std::vector<NDArray>& ts);
  std::vector<NDArray> trace_and_run(std::vector<NDArray>& ts, const std::vector<JitValue>& vs, bool symbolic);
  std::set<std::pair<size_t, int>> dynamic;  // automatic dims that have shown a second value
  // An entry that fails only on sizes of automatic dims: those dims turn
  // symbolic. Returns a note of the ones that did.
  std::string mark_dynamic(const std::vector<NDArray>& ts, const std::vector<JitValue>& vs) {
    std::string turned;
    for (const Entry& e : entries) {
      std::vector<std::pair<size_t, int>> sizes;
      bool only_sizes = true;
      for (const Guard& g : e.guards.list()) {
        if (g.pass(ts, vs)) continue;
        if (g.kind == Guard::Kind::size && policy_of(o, g.tensor, g.axis) == DynamicPolicy::automatic) sizes.push_back({g.tensor, g.axis});
        else only_sizes = false;
        if (!only_sizes || g.kind == Guard::Kind::tensor_count || g.kind == Guard::Kind::rank || g.kind == Guard::Kind::dtype) break;
      }
      if (!only_sizes) continue;
      for (const auto& d : sizes)
        if (dynamic.insert(d).second) turned += " tensors[" + std::to_string(d.first) + "].shape[" + std::to_string(d.second) + "]";
    }
    return turned.empty() ? "" : " with" + turned + " symbolic";
  }
  Entry make_entry(JitArgs::State& st, Graph g, bool* compiled);
  void limit_reached(const std::string& what);
  std::shared_ptr<Program> program_for(Graph g, const Bindings& params);
};

void JitFunction::Impl::limit_reached(const std::string& what) {
  note("call " + std::to_string(stats.calls) + ": cache limit " + std::to_string(o.cache_limit) + " reached: " + what +
                " runs on the interpreter");
  if (warned_limit) return;
  warned_limit = true;
  std::fprintf(stderr, "tensorjit: warning: jit '%s' reached its cache limit (%zu compiled graphs); new %s run on the interpreter\n",
               name.c_str(), o.cache_limit, breaking ? "graphs" : "shapes and values");
}

// A breaking function's graph: compiled once per distinct text, up to the limit.
std::shared_ptr<Program> JitFunction::Impl::program_for(Graph g, const Bindings& params) {
  std::string key = print_graph(g);
  if (auto it = graphs.find(key); it != graphs.end()) return it->second;
  Bindings used;
  for (ValueId p : g.params()) used[g.node(p).name] = params.at(g.node(p).name);
  bool compile = o.compile && graphs.size() < o.cache_limit;
  if (o.compile && !compile) {
    limit_reached("graph " + g.name());
    return std::make_shared<Program>(std::move(g), std::move(used), false);
  }
  auto t0 = Clock::now();
  auto p = std::make_shared<Program>(std::move(g), std::move(used), compile);
  stats.compile_seconds += seconds_since(t0);
  ++stats.compilations;
  graphs.emplace(std::move(key), p);
  return p;
}

// ---- graph breaks ----------------------------------------------------------------

// The graphs of one breaking trace: the tracer's graph is cut at each value
// read; each cut runs the ops since the previous one, with the values held
// by live proxies (and the one read) as its outputs.
struct Segments {
  Segments(JitFunction::Impl& fn, JitArgs::State& state, std::vector<NDArray>& ts) : f(fn), st(state), tensors(ts) {}
  JitFunction::Impl& f;
  JitArgs::State& st;
  std::vector<NDArray>& tensors;
  size_t start = 0;
  std::map<ValueId, NDArray> values;  // materialized by earlier graphs
  int breaks = 0;

  // The graph of ops [start, end) computing `outs`; references to earlier
  // values become inputs m0, m1, ... (`carried` lists their values).
  Graph build(const std::vector<ValueId>& outs, std::vector<ValueId>* carried) {
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
  void run(const std::vector<ValueId>& outs) {
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
    auto source = [&](const std::string& n) -> NDArray& {
      return n[0] == 'm' ? values.at(carried.at(std::stoul(n.substr(1)))) : tensors[static_cast<size_t>(std::stol(n.substr(1)))];
    };
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

  bool is_size_input(const std::string& input) const {
    for (const auto& [n, site] : st.real_sizes)
      if (n == input) return true;
    return false;
  }

  // The size a real_size() input stands for, if `input` is one.
  std::optional<int64_t> real_size(const std::string& input) const {
    for (const auto& [n, site] : st.real_sizes)
      if (n == input) return tensors[site.first].shape()[static_cast<size_t>(site.second)];
    return std::nullopt;
  }

  NDArray value_of(ValueId v) {
    const Graph& G = st.tracer.graph();
    const Node& n = G.node(v);
    if (auto size = real_size(n.name); n.op == Op::input && size) return NDArray::scalar(DType::i64, static_cast<double>(*size));
    if (n.op == Op::input) return tensors[static_cast<size_t>(std::stol(n.name.substr(1)))];
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

  double read(const Tensor& t, const std::source_location& where) {
    if (st.symbolic()) throw RestartStatic{"a graph break", true};
    const Node& n = st.tracer.graph().node(t.id());
    if (eval_shape(n.type.shape, {}).size() != 0 && numel(n.type.shape) != Dim(1))
      throw Error("item() of a tensor of " + n.type.str() + ": only one element can be read");
    ++breaks;
    ++f.stats.graph_breaks;
    std::string site = std::string(where.file_name()) + ":" + std::to_string(where.line()) + ": item() of " + n.def().name + " -> " +
                       n.type.str();
    if (f.break_sites[site]++ == 0)
      f.note("call " + std::to_string(f.stats.calls) + ": graph break " + std::to_string(breaks) + " at " + site + " (%" + std::to_string(t.id()) + ")");
    NDArray a = value_of(t.id());
    return a.to_vector().at(0);
  }

  // The function's outputs after the last cut.
  std::vector<NDArray> finish(const std::vector<Tensor>& outs) {
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
};

// ---- calls -----------------------------------------------------------------------

Entry JitFunction::Impl::make_entry(JitArgs::State& st, Graph g, bool* compiled) {
  Entry e;
  e.id = static_cast<int>(entries.size());
  e.compiled_at = stats.calls;
  const auto& ts = st.tensors;
  // Guards: counts, then per tensor dtype, rank and sizes, then values read.
  e.guards.add(Guard::make(Guard::Kind::tensor_count, 0, 0, static_cast<int64_t>(ts.size())));
  if (!st.values_read.empty()) e.guards.add(Guard::make(Guard::Kind::value_count, 0, 0, static_cast<int64_t>(*st.values_read.rbegin() + 1)));
  SymEnv padded_env;
  for (const auto& [sym, b] : st.bucket_of) padded_env[sym] = b;
  for (size_t i = 0; i < ts.size(); ++i) {
    Guard d = Guard::make(Guard::Kind::dtype, i);
    d.dtype = ts[i].dtype();
    e.guards.add(d);
    e.guards.add(Guard::make(Guard::Kind::rank, i, 0, static_cast<int64_t>(ts[i].shape().size())));
    e.used.push_back(st.proxies[i].has_value());
    e.padded.push_back(st.bucketed() ? eval_shape(st.dims[i], padded_env) : ts[i].shape());
    bool symbolic_dim = false;
    for (const Dim& d : st.dims[i]) symbolic_dim |= !d.is_const();
    e.pads.push_back(symbolic_dim && st.bucketed());  // even when this call's size is its bucket
    for (int a = 0; a < static_cast<int>(st.dims[i].size()); ++a) {
      const Dim& dim = st.dims[i][static_cast<size_t>(a)];
      if (dim.is_const()) {
        e.guards.add(Guard::make(Guard::Kind::size, i, a, dim.value()));
        continue;
      }
      const std::string sym = dim.symbols().at(0);
      if (st.bucketed()) {
        int64_t b = st.bucket_of.at(sym);
        int64_t lo = o.buckets.multiple > 0 ? b - o.buckets.multiple : b / 2;
        e.guards.add(Guard::make(Guard::Kind::size_range, i, a, std::max<int64_t>(lo, 1), b));
      } else {  // symbolic: every size from 2 on
        e.guards.add(Guard::make(Guard::Kind::size_range, i, a, 1, std::numeric_limits<int64_t>::max()));
      }
      auto site = st.symbol_site.at(sym);
      if (site != std::make_pair(i, a)) {
        Guard eq = Guard::make(Guard::Kind::sizes_equal, i, a);
        eq.other_tensor = site.first, eq.other_axis = site.second;
        e.guards.add(eq);
      }
    }
    e.buffers.emplace_back();
    if (e.pads.back()) e.buffers.back() = NDArray(ts[i].dtype(), e.padded.back());
  }
  for (size_t v : st.values_read) {
    Guard g = Guard::make(Guard::Kind::value, v);
    g.value = st.values[v];
    e.guards.add(g);
  }
  e.real_sizes = st.real_sizes;
  if (st.bucketed()) e.symbols = st.symbol_site;  // outputs cut to the real sizes
  for (ValueId o : g.outputs()) e.output_dims.push_back(g.type(o).shape);
  SymEnv hint;  // a symbolic graph is compiled once, its choices made at this call's sizes
  for (const auto& [sym, site] : st.symbol_site) hint[sym] = ts[site.first].shape()[static_cast<size_t>(site.second)];
  Graph concrete = st.bucketed() ? specialize(g, padded_env) : std::move(g);
  Bindings used;
  for (ValueId p : concrete.params()) used[concrete.node(p).name] = st.params.at(concrete.node(p).name);
  *compiled = entries.size() < o.cache_limit;  // false: past the limit, run once on the interpreter
  for (ValueId v : concrete.inputs()) {
    int t = -1;
    for (size_t i = 0; i < ts.size() && t < 0; ++i)
      if (concrete.node(v).name == tensor_name(i)) t = static_cast<int>(i);
    e.input_tensor.push_back(t);
  }
  e.program = std::make_shared<Program>(std::move(concrete), std::move(used), o.compile && *compiled, hint);
  return e;
}

std::vector<NDArray> JitFunction::Impl::run_entry(Entry& e, std::vector<NDArray>& ts) {
  Bindings in;
  for (const auto& [n, site] : e.real_sizes)  // before the arrays move into `in`
    in[n] = NDArray::scalar(DType::i64, static_cast<double>(ts[site.first].shape()[static_cast<size_t>(site.second)]));
  for (size_t i = 0; i < ts.size(); ++i) {
    if (!e.used[i]) continue;
    if (e.pads[i]) {  // padded positions are zero on every call, whatever the last one left
      pad_into(ts[i], e.buffers[i]);
      in[tensor_name(i)] = std::move(e.buffers[i]);
    } else {
      in[tensor_name(i)] = std::move(ts[i]);
    }
  }
  // Padded: a donated cache is cut straight out of its buffer below, not
  // copied out at the padded size first.
  RunOptions ro;
  ro.copy_donated_outputs = e.symbols.empty() || !e.program->exe;
  std::vector<NDArray> out;
  try {
    out = e.program->run(in, ro);
  } catch (...) {
    for (size_t i = 0; i < ts.size(); ++i)
      if (e.used[i]) (e.pads[i] ? e.buffers[i] : ts[i]) = std::move(in[tensor_name(i)]);
    throw;
  }
  for (size_t i = 0; i < ts.size(); ++i)
    if (e.used[i]) (e.pads[i] ? e.buffers[i] : ts[i]) = std::move(in[tensor_name(i)]);
  if (e.symbols.empty()) return out;
  SymEnv real;
  for (const auto& [sym, site] : e.symbols) real[sym] = ts[site.first].shape()[static_cast<size_t>(site.second)];
  const std::vector<int>* aliases = ro.copy_donated_outputs ? nullptr : &e.program->exe->output_aliases();
  for (size_t k = 0; k < out.size(); ++k) {
    auto shape = eval_shape(e.output_dims[k], real);
    int input = aliases ? (*aliases)[k] : -1;
    if (int t = input >= 0 ? e.input_tensor[static_cast<size_t>(input)] : -1; t >= 0) {  // a donated cache
      size_t i = static_cast<size_t>(t);
      out[k] = corner(e.pads[i] ? e.buffers[i] : ts[i], shape);
    } else {
      out[k] = corner(out[k], shape);
    }
  }
  return out;
}

std::vector<NDArray> JitFunction::Impl::trace_and_run(std::vector<NDArray>& ts, const std::vector<JitValue>& vs, bool symbolic) {
  auto t0 = Clock::now();
  JitArgs::State st(name, ts, vs, o, symbolic, dynamic);
  Segments seg(*this, st, ts);
  st.segments = &seg;
  st.tracer.set_value_reader([&seg](const Tensor& t, const std::source_location& w) { return seg.read(t, w); });
  JitArgs args(&st);
  std::vector<Tensor> outs = fn(args);
  for (const Tensor& t : outs)
    if (t.tracer() != &st.tracer) throw Error("jit '" + name + "': an output is not a tensor of this trace");
  if (seg.breaks > 0) {
    breaking = true;
    return seg.finish(outs);
  }
  Graph g = st.tracer.finish(outs);
  if (st.bucketed()) {
    if (std::string why = bucketing_hazard(g); !why.empty()) throw RestartStatic{why};
  }
  bool compiled = false;
  Entry e = make_entry(st, std::move(g), &compiled);
  if (!compiled) {
    limit_reached("this call");
    ++stats.eager_calls;
    ++stats.graphs_run;
    return run_entry(e, ts);
  }
  stats.compile_seconds += seconds_since(t0);
  ++stats.compilations;
  if (log_enabled("jit")) std::fprintf(stderr, "[jit] %s: entry %d compiled in %.3f s\n", name.c_str(), e.id, seconds_since(t0));
  entries.push_back(std::move(e));
  ++stats.graphs_run;
  return run_entry(entries.back(), ts);
}

std::vector<NDArray> JitFunction::Impl::call(std::vector<NDArray>& ts, const std::vector<JitValue>& vs) {
  ++stats.calls;
  // What this call may change before its trace succeeds: a call that fails
  // (a shape error, a bad argument) leaves the function as it found it.
  const auto dynamic_before = dynamic;
  const bool breaking_before = breaking;
  std::string turned;
  if (!breaking) {
    for (size_t k = entries.size(); k-- > 0;)
      if (entries[k].guards.pass(ts, vs)) {
        ++stats.hits;
        ++stats.graphs_run;
        return run_entry(entries[k], ts);
      }
    if (!entries.empty()) {
      std::string why;
      for (const Entry& e : entries) why += "\n    entry " + std::to_string(e.id) + ": " + e.guards.first_failure(ts, vs);
      turned = mark_dynamic(ts, vs);
      note("call " + std::to_string(stats.calls) + ": no entry's guards pass, recompiling" + turned + ":" + why);
    }
  }
  try {
    try {
      return trace_and_run(ts, vs, !breaking);
    } catch (const RestartStatic& r) {
      note("call " + std::to_string(stats.calls) + ": dynamic dims refused (" + r.why + "): traced again with static shapes");
      if (r.breaks) breaking = true;
      return trace_and_run(ts, vs, false);
    } catch (const Error& e) {
      if (turned.empty()) throw;
      // The dims just turned symbolic may be what failed (a size the code
      // needs to know): this call is traced with them static instead.
      dynamic = dynamic_before;
      note("call " + std::to_string(stats.calls) + ": the symbolic trace failed (" + e.what() + "): traced again with those dims static");
      return trace_and_run(ts, vs, !breaking);
    }
  } catch (...) {
    dynamic = dynamic_before;
    breaking = breaking_before;
    throw;
  }
}

JitFunction::JitFunction(std::string name, JitFn fn, JitOptions options) : p_(std::make_shared<Impl>()) {
  if (!fn) throw Error("jit: no function");
  if (options.cache_limit == 0) throw Error("jit: cache_limit must be at least 1");
  if (options.buckets.multiple < 0) throw Error("jit: bucket multiple must be positive");
  p_->name = std::move(name);
  p_->fn = std::move(fn);
  p_->o = std::move(options);
}

std::vector<NDArray> JitFunction::operator()(std::vector<NDArray>& tensors, const std::vector<JitValue>& values) {
  return p_->call(tensors, values);
}

std::vector<NDArray> JitFunction::operator()(std::vector<NDArray>&& tensors, const std::vector<JitValue>& values) {
  return p_->call(tensors, values);
}

bool JitFunction::would_hit(const std::vector<NDArray>& tensors, const std::vector<JitValue>& values) const {
  if (p_->breaking) return false;
  for (size_t k = p_->entries.size(); k-- > 0;)
    if (p_->entries[k].guards.pass(tensors, values)) return true;
  return false;
}

const JitStats& JitFunction::stats() const { return p_->stats; }

std::string JitFunction::explain() const {
  const Impl& f = *p_;
  const JitStats& s = f.stats;
  char head[256];
  std::snprintf(head, sizeof head, "jit '%s': %lld calls, %lld hits, %lld compilations (%.2f s), %lld on the interpreter, cache limit %zu\n",
                f.name.c_str(), (long long)s.calls, (long long)s.hits, (long long)s.compilations, s.compile_seconds,
                (long long)s.eager_calls, f.o.cache_limit);
  std::string r = head;
  if (f.breaking)
    r += "breaks the graph (reads tensor values): traced on every call; " + std::to_string(s.graph_breaks) + " breaks, " +
         std::to_string(s.graphs_run) + " graphs run, " + std::to_string(f.graphs.size()) + " distinct graphs compiled\n";
  for (const Entry& e : f.entries) {
    r += "entry " + std::to_string(e.id) + " (compiled at call " + std::to_string(e.compiled_at) + "):\n";
    for (const std::string& l : e.guards.summary()) r += "  " + l + "\n";
  }
  for (const auto& [site, count] : f.break_sites) r += "graph break at " + site + ": " + std::to_string(count) + " times\n";
  if (!f.log.empty()) r += "history:\n";
  for (const std::string& l : f.log) r += "  " + l + "\n";
  if (f.dropped > 0) r += "  (" + std::to_string(f.dropped) + " later notes not kept)\n";
  return r;
}

JitFunction jit(std::string name, JitFn fn, JitOptions options) { return JitFunction(std::move(name), std::move(fn), std::move(options)); }

}  // namespace tj
