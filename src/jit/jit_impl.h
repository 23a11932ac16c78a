// The JIT's internals (src/jit/jit.cpp, args.cpp, segments.cpp): the
// programs it compiles, the trace's view of a call's arguments, the cached
// entries with their guards, and the graphs of a function that breaks.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <source_location>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "jit/guards.h"
#include "runtime/executable.h"
#include "support/timing.h"
#include "tensorjit/jit.h"

namespace tj {

namespace jitimpl {

// The trace's input for tensor argument i.
inline std::string tensor_name(size_t i) { return "t" + std::to_string(i); }

// One graph, compiled (or on the interpreter), with the weights it holds.
struct Program {
  Graph graph;
  Bindings params;
  std::optional<Executable> exe;
  DType compute = DType::f32;

  Program(Graph g, Bindings p, bool compile, const SymEnv& size_hint = {}, DType weights = DType::f32, const std::string& device = "");
  std::vector<NDArray> run(Bindings& inputs, const RunOptions& o = {});
};

// The policy options give one dim.
inline DynamicPolicy policy_of(const JitOptions& o, size_t tensor, int axis) {
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

struct Segments;

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

}  // namespace jitimpl

struct JitArgs::State {
  Tracer tracer;
  const std::vector<NDArray>& tensors;
  const std::vector<JitValue>& values;
  std::vector<std::optional<Tensor>> proxies;
  std::vector<Shape> dims;  // per tensor, as traced: sizes, or bucket symbols
  std::map<std::string, std::pair<size_t, int>> symbol_site;  // symbol -> first (tensor, axis)
  std::map<std::string, int64_t> bucket_of;                   // symbol -> its bucket
  std::set<size_t> values_read;
  const std::vector<std::string>* tensor_names = nullptr;  // a call with named arguments
  const std::vector<std::string>* value_names = nullptr;
  Bindings params;
  std::vector<std::pair<std::string, std::pair<size_t, int>>> real_sizes;  // input name -> (tensor, axis)
  jitimpl::Segments* segments = nullptr;

  // `dynamic`: the automatic dims that have shown a second value; `symbolic`:
  // false traces every dim static (a function that breaks the graph).
  State(const std::string& name, const std::vector<NDArray>& ts, const std::vector<JitValue>& vs, const JitOptions& o, bool symbolic,
        const std::set<std::pair<size_t, int>>& dynamic);
  // The tensor argument an input of the trace is (t0, t1, ...), if it is one.
  std::map<std::string, size_t, std::less<>> tensor_inputs;
  bool bucketed() const { return !bucket_of.empty(); }
  bool symbolic() const { return !symbol_site.empty(); }
};

struct JitFunction::Impl {
  std::string name;
  JitFn fn;
  JitOptions o;
  std::vector<jitimpl::Entry> entries;
  JitStats stats;
  std::vector<std::string> log;  // recompilations, first graph break at each site, the cache limit
  int64_t dropped = 0;           // notes past the log's bound
  std::map<std::string, int64_t> break_sites;  // where item() broke the graph, and how often
  void note(std::string line) {
    if (log.size() < 100) log.push_back(std::move(line));
    else ++dropped;
  }
  bool breaking = false;         // the function reads values: traced on every call
  int last_entry = -1;           // the entry the latest call ran (JitFunction::last_entry)
  bool warned_limit = false;
  std::map<std::string, std::shared_ptr<jitimpl::Program>> graphs;  // a breaking function's graphs, by text

  // `given`: the caller gave its tensors up (an rvalue call), so donated
  // caches, updated in place, move into the outputs instead of being copied.
  std::vector<NDArray> call(std::vector<NDArray>& ts, const std::vector<JitValue>& vs, bool given = false);
  Graph differentiate(Graph g, const JitArgs::State& st) const;
  // The newest cached entry whose guards pass, or -1 (a miss).
  int find_hit(const std::vector<NDArray>& ts, const std::vector<JitValue>& vs) const;
  // Runs entry k, found by find_hit, counting the hit.
  std::vector<NDArray> run_hit(int k, std::vector<NDArray>& ts, bool given);
  // The names of a function called with named arguments (fixed by its first call).
  std::optional<std::vector<std::string>> tensor_names, value_names;
  std::vector<NDArray> call_named(Bindings& ts, const JitFunction::NamedValues& vs);
  std::vector<NDArray> run_entry(jitimpl::Entry& e, std::vector<NDArray>& ts, bool given);
  std::vector<NDArray> trace_and_run(std::vector<NDArray>& ts, const std::vector<JitValue>& vs, bool symbolic, bool given);
  std::set<std::pair<size_t, int>> dynamic;  // automatic dims that have shown a second value
  // An entry that fails only on sizes of automatic dims: those dims turn
  // symbolic. Returns a note of the ones that did.
  std::string mark_dynamic(const std::vector<NDArray>& ts, const std::vector<JitValue>& vs);
  jitimpl::Entry make_entry(JitArgs::State& st, Graph g, bool* compiled);
  void limit_reached(const std::string& what);
  std::shared_ptr<jitimpl::Program> program_for(Graph g, const Bindings& params);
};

namespace jitimpl {

// The graphs of one breaking trace: the tracer's graph is cut at each value
// read; each cut runs the ops since the previous one, with the values held
// by live proxies (and the one read) as its outputs (segments.cpp).
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
  Graph build(const std::vector<ValueId>& outs, std::vector<ValueId>* carried);
  // Runs the ops since the last cut; `outs` (values of this segment) are kept.
  void run(const std::vector<ValueId>& outs);
  bool is_size_input(const std::string& input) const;
  // The size a real_size() input stands for, if `input` is one.
  std::optional<int64_t> real_size(const std::string& input) const;
  NDArray value_of(ValueId v);
  double read(const Tensor& t, const std::source_location& where);
  // The function's outputs after the last cut.
  std::vector<NDArray> finish(const std::vector<Tensor>& outs);
};

}  // namespace jitimpl

}  // namespace tj
