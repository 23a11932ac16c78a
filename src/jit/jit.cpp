// tj::jit: a call's guards against the cached entries, tracing and compiling
// on a miss, running an entry (padding to buckets, cutting outputs back).
#include "tensorjit/jit.h"

#include <cstdio>
#include <limits>

#include "autodiff/vjp.h"
#include "compiler/compile.h"
#include "compiler/driver.h"
#include "ir/text.h"
#include "jit/buckets.h"
#include "jit/jit_impl.h"
#include "jit/padding.h"
#include "passes/specialize.h"
#include "reference/interpreter.h"
#include "support/log.h"
#include "tensorjit/error.h"

namespace tj {

using namespace jitimpl;

int64_t Buckets::of(int64_t size) const {
  if (multiple > 0) return (size + multiple - 1) / multiple * multiple;
  int64_t b = 1;
  while (b < size) b *= 2;
  return b;
}

namespace jitimpl {

Program::Program(Graph g, Bindings p, bool compile, const SymEnv& size_hint, DType weights, const std::string& device)
    : graph(std::move(g)), params(std::move(p)) {
  // Interpreted (no compilation): in f64 when any value is, outputs rounded to their dtypes.
  bool f64 = false;
  for (const Node& n : graph.nodes()) f64 |= n.type.dtype == DType::f64;
  compute = f64 ? DType::f64 : DType::f32;
  CompileOptions co;
  co.size_hint = size_hint;
  co.weights = weights;
  if (!device.empty()) co.device = parse_device(device);
  if (compile) exe = tj::compile(graph, params, co);
}

std::vector<NDArray> Program::run(Bindings& inputs, const RunOptions& o) {
  if (exe) {
    std::vector<NDArray> out;
    exe->run(inputs, out, o);
    return out;
  }
  Bindings all = params;
  for (auto& [k, v] : inputs) all[k] = v;
  return interpret(graph, all, {compute, true});
}

}  // namespace jitimpl

// An entry that fails only on sizes of automatic dims: those dims turn
// symbolic. Returns a note of the ones that did.
std::string JitFunction::Impl::mark_dynamic(const std::vector<NDArray>& ts, const std::vector<JitValue>& vs) {
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
  auto p = std::make_shared<Program>(std::move(g), std::move(used), compile, SymEnv{}, o.weights, o.device);
  stats.compile_seconds += seconds_since(t0);
  ++stats.compilations;
  graphs.emplace(std::move(key), p);
  return p;
}

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
    auto t = st.tensor_inputs.find(concrete.node(v).name);
    e.input_tensor.push_back(t == st.tensor_inputs.end() ? -1 : static_cast<int>(t->second));
  }
  e.program = std::make_shared<Program>(std::move(concrete), std::move(used), o.compile && *compiled, hint, o.weights, o.device);
  return e;
}

std::vector<NDArray> JitFunction::Impl::run_entry(Entry& e, std::vector<NDArray>& ts, bool given) {
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
  // copied out at the padded size first. Given up by the caller: it moves
  // into its output below.
  RunOptions ro;
  ro.copy_donated_outputs = !e.program->exe || (e.symbols.empty() && !given);
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
  if (e.symbols.empty()) {
    if (ro.copy_donated_outputs) return out;
    const std::vector<int>& aliases = e.program->exe->output_aliases();
    for (size_t k = 0; k < out.size(); ++k) {
      int input = aliases[k];
      int t = input >= 0 ? e.input_tensor[static_cast<size_t>(input)] : -1;
      if (t < 0) continue;
      NDArray& cache = ts[static_cast<size_t>(t)];
      if (cache.raw()) out[k] = std::move(cache);
      else  // a second output of the same cache: already moved into an earlier one
        for (size_t j = 0; j < k; ++j)
          if (aliases[j] == input) out[k] = out[j];
    }
    return out;
  }
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

// The traced graph's value and its gradients (JitOptions::grad_wrt).
Graph JitFunction::Impl::differentiate(Graph g, const JitArgs::State& st) const {
  if (st.bucketed()) throw Error("jit '" + name + "': gradients with bucketed shapes are not supported (padding would enter them)");
  if (g.outputs().size() != 1 || numel(g.type(g.outputs()[0]).shape) != Dim(1))
    throw Error("jit '" + name + "': a function differentiated must return one scalar, it returned " + std::to_string(g.outputs().size()) +
                " value(s)" + (g.outputs().empty() ? "" : ", the first " + g.type(g.outputs()[0]).str()));
  VjpSpec spec;
  for (size_t i : o.grad_wrt) spec.wrt.push_back(tensor_name(i));
  spec.outputs = {0};
  spec.seed_ones = true;
  return vjp(g, spec).joint;
}

std::vector<NDArray> JitFunction::Impl::trace_and_run(std::vector<NDArray>& ts, const std::vector<JitValue>& vs, bool symbolic,
                                                      bool given) {
  auto t0 = Clock::now();
  JitArgs::State st(name, ts, vs, o, symbolic, dynamic);
  if (tensor_names) st.tensor_names = &*tensor_names, st.value_names = &*value_names;
  Segments seg(*this, st, ts);
  st.segments = &seg;
  st.tracer.set_value_reader([&seg](const Tensor& t, const std::source_location& w) { return seg.read(t, w); });
  JitArgs args(&st);
  for (size_t i : o.grad_wrt) {  // inputs of the graph even if the function does not read them (their gradient is zero)
    if (i >= ts.size()) throw Error("jit '" + name + "': a gradient with respect to tensor " + std::to_string(i) + " of " + std::to_string(ts.size()));
    args.tensor(i);
  }
  std::vector<Tensor> outs = fn(args);
  for (const Tensor& t : outs)
    if (t.tracer() != &st.tracer) throw Error("jit '" + name + "': an output is not a tensor of this trace");
  if (seg.breaks > 0) {
    if (!o.grad_wrt.empty()) throw Error("jit '" + name + "': a function that reads tensor values (a graph break) cannot be differentiated");
    breaking = true;
    return seg.finish(outs);
  }
  Graph g = st.tracer.finish(outs);
  if (!o.grad_wrt.empty()) g = differentiate(std::move(g), st);
  if (st.bucketed()) {
    if (std::string why = bucketing_hazard(g); !why.empty()) throw RestartStatic{why};
  }
  bool compiled = false;
  Entry e = make_entry(st, std::move(g), &compiled);
  if (!compiled) {
    limit_reached("this call");
    ++stats.eager_calls;
    ++stats.graphs_run;
    return run_entry(e, ts, given);
  }
  stats.compile_seconds += seconds_since(t0);
  ++stats.compilations;
  if (log_enabled("jit")) std::fprintf(stderr, "[jit] %s: entry %d compiled in %.3f s\n", name.c_str(), e.id, seconds_since(t0));
  entries.push_back(std::move(e));
  ++stats.graphs_run;
  last_entry = static_cast<int>(entries.size()) - 1;
  return run_entry(entries.back(), ts, given);
}

std::vector<NDArray> JitFunction::Impl::call(std::vector<NDArray>& ts, const std::vector<JitValue>& vs, bool given) {
  ++stats.calls;
  // What this call may change before its trace succeeds: a call that fails
  // (a shape error, a bad argument) leaves the function as it found it.
  const auto dynamic_before = dynamic;
  const bool breaking_before = breaking;
  std::string turned;
  last_entry = -1;
  if (!breaking) {
    if (int k = find_hit(ts, vs); k >= 0) return run_hit(k, ts, given);
    if (!entries.empty()) {
      std::string why;
      for (const Entry& e : entries) why += "\n    entry " + std::to_string(e.id) + ": " + e.guards.first_failure(ts, vs);
      turned = mark_dynamic(ts, vs);
      note("call " + std::to_string(stats.calls) + ": no entry's guards pass, recompiling" + turned + ":" + why);
    }
  }
  try {
    try {
      return trace_and_run(ts, vs, !breaking, given);
    } catch (const RestartStatic& r) {
      note("call " + std::to_string(stats.calls) + ": dynamic dims refused (" + r.why + "): traced again with static shapes");
      if (r.breaks) breaking = true;
      return trace_and_run(ts, vs, false, given);
    } catch (const Error& e) {
      if (turned.empty()) throw;
      // The dims just turned symbolic may be what failed (a size the code
      // needs to know): this call is traced with them static instead.
      dynamic = dynamic_before;
      note("call " + std::to_string(stats.calls) + ": the symbolic trace failed (" + e.what() + "): traced again with those dims static");
      return trace_and_run(ts, vs, !breaking, given);
    }
  } catch (...) {
    dynamic = dynamic_before;
    breaking = breaking_before;
    throw;
  }
}

std::vector<NDArray> JitFunction::Impl::call_named(Bindings& named_ts, const JitFunction::NamedValues& named_vs) {
  std::vector<std::string> tn, vn;
  std::vector<NDArray> ts;
  std::vector<JitValue> vs;
  for (auto& [k, v] : named_ts) tn.push_back(k);
  for (const auto& [k, v] : named_vs) vn.push_back(k), vs.push_back(v);
  if (tensor_names && (tn != *tensor_names || vn != *value_names)) {
    auto list = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& n : v) s += (s.empty() ? "" : ", ") + n;
      return "{" + s + "}";
    };
    throw Error("jit '" + name + "': called with tensors " + list(tn) + " and values " + list(vn) + ", but first with " + list(*tensor_names) +
                " and " + list(*value_names));
  }
  if (!tensor_names && !entries.empty()) throw Error("jit '" + name + "': called with named arguments after positional ones");
  const bool first = !tensor_names;
  tensor_names = tn, value_names = vn;
  for (auto& [k, v] : named_ts) ts.push_back(std::move(v));
  auto give_back = [&] {
    size_t i = 0;
    for (auto& [k, v] : named_ts) v = std::move(ts[i++]);
  };
  try {
    auto out = call(ts, vs);
    give_back();
    return out;
  } catch (...) {
    give_back();
    if (first && entries.empty()) tensor_names.reset(), value_names.reset();
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
  if (p_->tensor_names) throw Error("jit '" + p_->name + "': called with positional arguments after named ones");
  return p_->call(tensors, values);
}

std::vector<NDArray> JitFunction::operator()(std::vector<NDArray>&& tensors, const std::vector<JitValue>& values) {
  if (p_->tensor_names) throw Error("jit '" + p_->name + "': called with positional arguments after named ones");
  return p_->call(tensors, values, true);
}

std::vector<NDArray> JitFunction::operator()(Bindings& tensors, const NamedValues& values) { return p_->call_named(tensors, values); }
std::vector<NDArray> JitFunction::operator()(Bindings&& tensors, const NamedValues& values) { return p_->call_named(tensors, values); }

bool JitFunction::would_hit(const std::vector<NDArray>& tensors, const std::vector<JitValue>& values) const {
  return !p_->breaking && p_->find_hit(tensors, values) >= 0;
}

int JitFunction::Impl::find_hit(const std::vector<NDArray>& ts, const std::vector<JitValue>& vs) const {
  for (size_t k = entries.size(); k-- > 0;)
    if (entries[k].guards.pass(ts, vs)) return static_cast<int>(k);
  return -1;
}

std::vector<NDArray> JitFunction::Impl::run_hit(int k, std::vector<NDArray>& ts, bool given) {
  ++stats.hits;
  ++stats.graphs_run;
  last_entry = k;
  return run_entry(entries[static_cast<size_t>(k)], ts, given);
}

int JitFunction::call_cached(std::vector<NDArray>&& tensors, const std::vector<JitValue>& values, std::vector<NDArray>& out) {
  Impl& f = *p_;
  if (f.breaking || f.tensor_names) return -1;
  int k = f.find_hit(tensors, values);
  if (k < 0) return -1;
  ++f.stats.calls;
  out = f.run_hit(k, tensors, true);
  return k;
}

int JitFunction::last_entry() const { return p_->last_entry; }

const JitStats& JitFunction::stats() const { return p_->stats; }

JitExplanation JitFunction::explanation() const {
  const Impl& f = *p_;
  JitExplanation x;
  x.name = f.name;
  x.stats = f.stats;
  x.cache_limit = f.o.cache_limit;
  x.breaks_graph = f.breaking;
  x.distinct_graphs = f.graphs.size();
  for (const Entry& e : f.entries) x.entries.push_back({e.id, e.compiled_at, e.guards.summary()});
  for (const auto& [site, count] : f.break_sites) x.break_sites.emplace_back(site, count);
  x.history.assign(f.log.begin(), f.log.end());
  x.dropped_notes = f.dropped;
  return x;
}

std::string JitFunction::explain() const {
  const JitExplanation x = explanation();
  const JitStats& s = x.stats;
  char head[256];
  std::snprintf(head, sizeof head, "jit '%s': %lld calls, %lld hits, %lld compilations (%.2f s), %lld on the interpreter, cache limit %zu\n",
                x.name.c_str(), (long long)s.calls, (long long)s.hits, (long long)s.compilations, s.compile_seconds,
                (long long)s.eager_calls, x.cache_limit);
  std::string r = head;
  if (x.breaks_graph)
    r += "breaks the graph (reads tensor values): traced on every call; " + std::to_string(s.graph_breaks) + " breaks, " +
         std::to_string(s.graphs_run) + " graphs run, " + std::to_string(x.distinct_graphs) + " distinct graphs compiled\n";
  for (const auto& e : x.entries) {
    r += "entry " + std::to_string(e.id) + " (compiled at call " + std::to_string(e.compiled_at) + "):\n";
    for (const std::string& l : e.guards) r += "  " + l + "\n";
  }
  for (const auto& [site, count] : x.break_sites) r += "graph break at " + site + ": " + std::to_string(count) + " times\n";
  if (!x.history.empty()) r += "history:\n";
  for (const std::string& l : x.history) r += "  " + l + "\n";
  if (x.dropped_notes > 0) r += "  (" + std::to_string(x.dropped_notes) + " later notes not kept)\n";
  return r;
}

JitFunction jit(std::string name, JitFn fn, JitOptions options) { return JitFunction(std::move(name), std::move(fn), std::move(options)); }

JitFunction jit(std::string name, JitFn1 fn, JitOptions options) {
  if (!fn) throw Error("jit: no function");
  return JitFunction(std::move(name), [fn = std::move(fn)](JitArgs& a) { return std::vector<Tensor>{fn(a)}; }, std::move(options));
}

}  // namespace tj
