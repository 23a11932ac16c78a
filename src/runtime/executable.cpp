#include "runtime/executable.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>

#include "ir/rewriter.h"
#include "memory/lifetimes.h"
#include "passes/specialize.h"
#include "reference/random_inputs.h"
#include "runtime/call_checks.h"
#include "runtime/device_program.h"
#include "runtime/host_program.h"
#include "runtime/library_conv.h"
#include "runtime/split_choice.h"
#include "runtime/thread_pool.h"
#include "support/timing.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

struct Aligned {
  void operator()(void* p) const { std::free(p); }
};
using Block = std::unique_ptr<void, Aligned>;

Block allocate(int64_t bytes) {
  size_t n = static_cast<size_t>((std::max<int64_t>(bytes, 1) + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, n);
  if (!p) throw Error("out of memory allocating " + std::to_string(n) + " bytes");
  std::memset(p, 0, n);
  return Block(p);
}

}  // namespace

struct Executable::State {
  Graph graph;  // optimized
  Schedule schedule;
  CompileStats stats;
  std::string source;
  std::shared_ptr<LoadedLibrary> library;
  std::vector<void (*)(void**)> kernels;
  void (*check_indices)(void**) = nullptr;  // the free gathers' indices, before the kernels
  std::shared_ptr<HostProgram> host;   // a graph with control flow
  std::shared_ptr<DeviceProgram> device;  // kernels on a GPU or OpenCL device
  std::vector<void (*)(void**, void*)> output_fns;
  int* status = nullptr;
  std::vector<void*> table;
  std::shared_ptr<LibraryState> library_state = std::make_shared<LibraryState>();  // the tj_slot_library slot: the library's conv plans
  std::vector<Block> owned;  // arena, temporaries, scratch, constants
  std::shared_ptr<const void> prepared;  // the program cache's constants (tj.const.N params), read in place
  std::vector<ValueId> inputs;
  std::vector<std::vector<int64_t>> input_shapes, output_shapes;  // at the bound sizes
  // Sizes: a graph with size symbols is planned again whenever a call binds
  // them to new values (arena offsets, temporaries, scratch, the tj_slot_sizes slot).
  bool symbolic = false;
  bool bound = false;
  SymEnv sizes, capacity;                 // the bound sizes; the sizes memory is laid out for
  std::vector<ValueId> sized_values;      // values whose storage the layout sized: activations, temporaries
  EmittedProgram prog;
  Block arena, temps, scratch;
  int64_t arena_cap = 0, temps_cap = 0, scratch_cap = 0;
  std::vector<int64_t> sym_values;
  int threads = 1;  // the pool's threads (what scratch is sized for)
  int split_small = 1;      // the tj_slot_split_small slot: this call's small kernels split over the pool (see RunOptions)
  SplitChoice split_choice;
  void bind(const SymEnv& env);
  int64_t hold_weights(const Bindings& params, const std::unordered_map<std::string, const void*>& prepared_constants);
  void find_aliases();
  std::vector<std::pair<ValueId, ValueId>> aliases;  // kv_write result -> its cache buffer
  std::vector<int> output_alias;                     // per output: that input's index in graph.inputs(), or -1
  Bindings fallback_params;
  DType fallback_compute = DType::f32;
};

Executable Executable::on_host(Graph graph, const CompilePart& compile_part, CompileStats stats) {
  auto s = std::make_shared<State>();
  s->inputs = graph.inputs();
  s->output_alias.assign(graph.outputs().size(), -1);  // the host copies every output
  s->graph = std::move(graph);
  s->host = std::make_shared<HostProgram>(s->graph, compile_part);
  s->stats = std::move(stats);
  s->stats.compiled = true;
  s->stats.kernels = static_cast<size_t>(s->host->graphs());
  return Executable(s);
}

Executable Executable::interpreted(Graph graph, const Bindings& params, CompileStats stats) {
  auto s = std::make_shared<State>();
  s->inputs = graph.inputs();
  s->output_alias.assign(graph.outputs().size(), -1);  // the interpreter copies every output
  s->graph = std::move(graph);
  s->fallback_params = params;
  bool f64 = false;  // in f64 when any value is; outputs rounded to their dtypes, as compiled code gives them
  for (const Node& n : s->graph.nodes()) f64 |= n.type.dtype == DType::f64;
  s->fallback_compute = f64 ? DType::f64 : DType::f32;
  s->stats = std::move(stats);
  s->stats.compiled = false;
  return Executable(s);
}

Executable Executable::load(Parts parts, EmittedProgram program, const BuildResult& built, const Bindings& params,
                            const ThreadPool& pool, CompileStats stats) {
  auto s = std::make_shared<State>();
  s->stats = std::move(stats);
  s->graph = std::move(parts.graph);
  s->schedule = std::move(parts.schedule);
  s->prepared = std::move(parts.prepared);
  s->prog = std::move(program);
  s->inputs = s->graph.inputs();
  s->symbolic = !size_symbols(s->graph).empty();
  s->output_alias.assign(s->graph.outputs().size(), -1);
  const Graph& g = s->graph;
  const EmittedProgram& prog = s->prog;
  s->source = prog.source;
  s->library = built.library;
  for (const auto& name : prog.kernel_symbols) s->kernels.push_back(reinterpret_cast<void (*)(void**)>(built.library->symbol(name.c_str())));
  for (const auto& name : prog.output_symbols)
    s->output_fns.push_back(reinterpret_cast<void (*)(void**, void*)>(built.library->symbol(name.c_str())));
  if (!prog.check_symbol.empty())
    s->check_indices = reinterpret_cast<void (*)(void**)>(built.library->symbol(prog.check_symbol.c_str()));
  s->status = static_cast<int*>(built.library->symbol("tj_status"));

  // The table: every value in memory gets its address; activations when the
  // sizes are bound (now, for a graph without size symbols).
  s->table.assign(g.size() + tj_slots, nullptr);
  s->table[g.size() + tj_slot_split_small] = &s->split_small;
  s->threads = pool.threads();
  s->table[g.size() + tj_slot_runtime] = const_cast<tj_runtime_api*>(pool.api());
  s->table[g.size() + tj_slot_library] = s->library_state.get();
  s->stats.constant_bytes = s->hold_weights(params, parts.prepared_constants);
  s->find_aliases();
  s->stats.compiled = true;
  s->stats.kernels = s->schedule.kernels.size();
  if (!s->symbolic) s->bind({});
  return Executable(s);
}

// Table entries for the params and constants the program reads: the program
// cache's constants and the graph's own read in place, params copied.
// Returns their bytes.
int64_t Executable::State::hold_weights(const Bindings& params, const std::unordered_map<std::string, const void*>& prepared_constants) {
  const Graph& g = graph;
  int64_t const_bytes = 0;
  auto users = users_of(g);  // params that freezing left without users are not copied
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (users[i].empty()) continue;
    if (n.op == Op::param) {
      if (auto it = prepared_constants.find(n.name); it != prepared_constants.end()) {  // read in place
        table[i] = const_cast<void*>(it->second);
        const_bytes += numel(n.type.shape).value() * static_cast<int64_t>(dtype_size(n.type.dtype));
        continue;
      }
    }
    if (n.op == Op::constant && n.const_data()->size() > 1) {  // read in place: the graph holds it, in its dtype
      table[i] = const_cast<void*>(n.const_data()->raw());
      const_bytes += static_cast<int64_t>(n.const_data()->nbytes());
      continue;
    }
    if (n.op != Op::param) continue;
    const NDArray& data = params.at(n.name);
    Block b = allocate(static_cast<int64_t>(data.nbytes()));
    if (data.nbytes()) std::memcpy(b.get(), data.raw(), data.nbytes());
    table[i] = b.get();
    const_bytes += static_cast<int64_t>(data.nbytes());
    owned.push_back(std::move(b));
  }
  return const_bytes;
}

// kv_write results in their caches' arrays, and the outputs those are.
void Executable::State::find_aliases() {
  const Graph& g = graph;
  for (size_t v = 0; v < g.size(); ++v)
    if (ValueId cache = schedule.in_place[v]; cache >= 0) aliases.emplace_back(static_cast<ValueId>(v), cache);
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    ValueId cache = schedule.in_place[static_cast<size_t>(g.outputs()[k])];
    auto at = std::find(inputs.begin(), inputs.end(), cache);
    output_alias[k] = cache >= 0 && at != inputs.end() ? static_cast<int>(at - inputs.begin()) : -1;
  }
}

Executable Executable::load_on_device(const device::Kind& kind, Parts parts, gpu::Program program, const Bindings& params, CompileStats stats) {
  auto s = std::make_shared<State>();
  s->stats = std::move(stats);
  s->graph = std::move(parts.graph);
  s->schedule = std::move(parts.schedule);
  s->prepared = std::move(parts.prepared);
  s->inputs = s->graph.inputs();
  s->symbolic = !size_symbols(s->graph).empty();
  s->output_alias.assign(s->graph.outputs().size(), -1);
  s->source = program.source;
  s->table.assign(s->graph.size() + tj_slots, nullptr);
  s->stats.constant_bytes = s->hold_weights(params, parts.prepared_constants);
  const std::vector<const void*> held(s->table.begin(), s->table.begin() + static_cast<std::ptrdiff_t>(s->graph.size()));
  s->device = std::make_shared<DeviceProgram>(kind, s->graph, s->schedule, std::move(program), held);
  s->find_aliases();
  s->stats.compiled = true;
  s->stats.kernels = s->schedule.kernels.size();
  return Executable(s);
}

TuningTarget Executable::tuning_target(const SymEnv& hint) {
  auto s = s_;
  TuningTarget target;
  target.tunable = &s->prog.tunable;
  target.kernels = &s->kernels;
  target.resolve = [s](const std::string& name) { return reinterpret_cast<void (*)(void**)>(s->library->symbol(name.c_str())); };
  // Seeded inputs at the sizes choices are made at, alive as long as the
  // target: the table points into them (a donated cache is written in place).
  struct Run {
    Bindings in;
    std::vector<NDArray> out;
  };
  auto held = std::make_shared<Run>();
  // Integer scalars (a decode position) as large as the inputs allow, so
  // that an attention sees as many keys as in a late decode step: each
  // size of an input's dims less one, largest first, then 0; the first
  // that runs (index checks, a cache write past the end, fail the others).
  Executable self = *this;
  target.prepare = [self, s, held, hint]() mutable {
    std::set<int64_t, std::greater<>> sizes = {1};
    for (ValueId v : s->graph.inputs())
      for (const Dim& d : s->graph.node(v).type.shape) sizes.insert(std::max<int64_t>(d.eval(hint), 1));
    std::string failed;
    for (int64_t size : sizes) {
      const int64_t fill = size - 1;
      RandomInputOptions ro;
      ro.seed = 1;
      ro.sizes = hint;
      for (ValueId p : s->graph.params()) ro.given.insert(s->graph.node(p).name);  // held: none made for them
      for (ValueId v : s->graph.inputs()) {
        const Node& n = s->graph.node(v);
        if (!is_float(n.type.dtype) && n.type.rank() == 0) ro.fixed[n.name] = static_cast<double>(fill);
      }
      held->in.clear();
      held->in = random_inputs(s->graph, ro);
      try {
        self.run(held->in, held->out);  // binds the inputs, and every kernel's operands are in place
      } catch (const Error& e) {
        failed = e.what();
        continue;
      }
      s->split_small = s->split_choice.choice();  // as calls run now
      return s->table.data();
    }
    throw Error(failed);
  };
  return target;
}

void Executable::set_stats(CompileStats stats) { s_->stats = std::move(stats); }

// Memory is laid out for `capacity` (each symbol rounded up to a power of
// two) and reused while every buffer the layout sized still fits: sizes
// are polynomials that grow with their symbols, so a layout for larger
// sizes holds smaller ones. Only a size past the capacity lays out again.
void Executable::State::bind(const SymEnv& env) {
  if (bound && env == sizes) return;
  const Graph& g = graph;
  auto bytes = [&](ValueId v, const SymEnv& e) { return numel(g.type(v).shape).eval(e) * static_cast<int64_t>(dtype_size(g.type(v).dtype)); };
  // Whether memory laid out at sizes `c` holds `values`, the temporaries and
  // the scratch at the call's sizes.
  auto holds = [&](const SymEnv& c, const std::vector<ValueId>& values) {
    for (ValueId v : values)
      if (bytes(v, env) > bytes(v, c)) return false;
    for (const Dim& d : prog.temporary_sizes)
      if (d.eval(env) > d.eval(c)) return false;
    for (const Dim& d : prog.scratch_sizes)
      if (d.eval(env) > d.eval(c)) return false;
    return true;
  };
  bool fits = bound;
  for (const auto& [x, v] : env) fits = fits && capacity.count(x) && v <= capacity.at(x);
  if (fits && holds(capacity, sized_values)) {
    for (size_t k = 0; k < prog.symbols.size(); ++k) sym_values[k] = env.at(prog.symbols[k]);
    for (size_t i = 0; i < inputs.size(); ++i) input_shapes[i] = eval_shape(g.type(inputs[i]).shape, env);
    for (size_t i = 0; i < g.outputs().size(); ++i) output_shapes[i] = eval_shape(g.type(g.outputs()[i]).shape, env);
    sizes = env;
    return;
  }
  SymEnv cap;
  for (const auto& [x, v] : env) {
    int64_t c = 1;
    while (c < v) c *= 2;
    cap[x] = c;
  }
  // A size that shrinks as its symbol grows (a slice from S to a constant)
  // would not fit a layout made at the larger sizes: then lay out at the
  // call's own sizes.
  Graph concrete;
  if (symbolic) {
    try {
      std::vector<ValueId> all(g.size());
      std::iota(all.begin(), all.end(), ValueId{0});
      if (!holds(cap, all)) cap = env;
      concrete = specialize(g, cap);
    } catch (const Error&) {  // the rounded sizes make no valid graph (a slice past its end)
      cap = env;
      concrete = specialize(g, cap);
    }
  }
  const Graph& cg = symbolic ? concrete : g;
  ActivationPlan plan = plan_activations(cg, schedule);
  sized_values.clear();
  for (const auto& b : plan.buffers) sized_values.push_back(b.value);
  auto grow = [](Block* b, int64_t* cap, int64_t need) {
    if (need > *cap || !*b) *b = allocate(need), *cap = std::max<int64_t>(need, 1);
  };
  grow(&arena, &arena_cap, plan.plan.peak_bytes);
  for (const auto& b : plan.buffers)
    table[static_cast<size_t>(b.value)] = static_cast<char*>(arena.get()) + plan.plan.offsets[static_cast<size_t>(b.slot)];
  TemporaryLayout tl = lay_out_temporaries(prog, cap);
  grow(&temps, &temps_cap, tl.bytes);
  for (size_t i = 0; i < prog.temporaries.size(); ++i)
    table[static_cast<size_t>(prog.temporaries[i])] = static_cast<char*>(temps.get()) + tl.offsets[i];
  grow(&scratch, &scratch_cap, scratch_bytes_per_thread(prog, cap) * threads);
  table[g.size() + tj_slot_scratch] = scratch.get();
  sym_values.clear();
  for (const auto& x : prog.symbols) sym_values.push_back(env.at(x));
  table[g.size() + tj_slot_sizes] = sym_values.data();
  input_shapes.clear();
  output_shapes.clear();
  for (ValueId v : inputs) input_shapes.push_back(eval_shape(g.type(v).shape, env));
  for (ValueId v : g.outputs()) output_shapes.push_back(eval_shape(g.type(v).shape, env));
  stats.arena_bytes = plan.plan.peak_bytes;
  stats.temporary_bytes = tl.bytes;
  stats.scratch_bytes = scratch_cap;
  sizes = env;
  capacity = cap;
  bound = true;
}

void Executable::run(Bindings& inputs, std::vector<NDArray>& outputs, const RunOptions& o) {
  State& s = *s_;
  const Graph& g = s.graph;
  if (s.host) {
    outputs = s.host->run(inputs);
    return;
  }
  if (s.device) {
    s.device->run(inputs, outputs, o);
    return;
  }
  if (!s.stats.compiled) {
    Bindings all = s.fallback_params;
    for (const auto& [k, v] : inputs) all[k] = v;
    outputs = interpret(g, all, {s.fallback_compute, true});
    return;
  }
  check_input_names(g, inputs);
  if (s.symbolic) s.bind(sizes_from_inputs(g, inputs));  // every dim is checked below
  for (size_t i = 0; i < s.inputs.size(); ++i)  // donated caches are written in place
    s.table[static_cast<size_t>(s.inputs[i])] = checked_input(g, s.inputs[i], inputs, s.input_shapes[i]).raw();
  for (const auto& [kv, cache] : s.aliases) s.table[static_cast<size_t>(kv)] = s.table[static_cast<size_t>(cache)];
  auto check_status = [&] {
    if (*s.status != 0) throw Error(status_message(*s.status));
  };
  *s.status = 0;
  void** t = s.table.data();
  if (s.check_indices) {  // before any kernel runs: a bad index leaves donated inputs as they were
    s.check_indices(t);
    check_status();
  }
  // A decode step's small kernels: split over the pool or not, as measured.
  bool measured = s.prog.splits_small_kernels && s.threads > 1 && o.split_small_kernels < 0;
  s.split_small = measured ? s.split_choice.next() : o.split_small_kernels != 0;
  bool timed = measured && s.split_choice.timing();
  const auto t0 = timed ? Clock::now() : Clock::time_point{};
  for (auto* k : s.kernels) k(t);
  if (timed) s.split_choice.record(seconds_since(t0));
  check_status();
  // Reuse the caller's arrays when they already have the right types. A
  // donated cache left out is left as the caller had it (no array at first).
  outputs.resize(g.outputs().size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!o.copy_donated_outputs && s.output_alias[i] >= 0) continue;
    DType t = g.type(g.outputs()[i]).dtype;
    if (outputs[i].dtype() != t || outputs[i].shape() != s.output_shapes[i] || !outputs[i].raw())
      outputs[i] = NDArray(t, s.output_shapes[i]);
  }
  for (size_t i = 0; i < s.output_fns.size(); ++i)
    if (o.copy_donated_outputs || s.output_alias[i] < 0) s.output_fns[i](t, outputs[i].raw());
  check_status();  // an output read through a view or a gather computes indices too
}

std::vector<NDArray> Executable::run(Bindings& inputs) {
  std::vector<NDArray> out;
  run(inputs, out);
  return out;
}

std::vector<double> Executable::profile(Bindings& inputs, int reps) {
  State& s = *s_;
  if (s.device) return s.device->profile(inputs, reps);
  std::vector<NDArray> out;
  run(inputs, out);  // binds the inputs
  s.split_small = s.split_choice.choice();  // as calls run now
  std::vector<std::vector<double>> t(s.kernels.size());
  for (int r = 0; r < reps; ++r)
    for (size_t k = 0; k < s.kernels.size(); ++k) {
      const auto t0 = Clock::now();
      s.kernels[k](s.table.data());
      t[k].push_back(seconds_since(t0));
    }
  std::vector<double> med;
  for (const auto& v : t) med.push_back(quantile(v, 0.5));
  return med;
}

const Schedule& Executable::schedule() const { return s_->schedule; }

std::string Executable::device() const { return s_->device ? s_->device->device() : "cpu"; }

const std::vector<int>& Executable::output_aliases() const { return s_->output_alias; }

const CompileStats& Executable::stats() const { return s_->stats; }
const std::string& Executable::source() const { return s_->source; }
const Graph& Executable::optimized() const { return s_->graph; }

Bindings Executable::held_params() const {
  if (s_->host) throw Unsupported("held_params: a program with control flow holds its params in its parts");
  if (!s_->stats.compiled) return s_->fallback_params;
  Bindings r;
  const Graph& g = s_->graph;
  for (ValueId p : g.params()) {
    const Node& n = g.node(p);
    const void* data = static_cast<size_t>(p) < s_->table.size() ? s_->table[static_cast<size_t>(p)] : nullptr;
    std::vector<int64_t> shape;
    for (const Dim& d : n.type.shape) shape.push_back(d.value());
    if (!data) {  // unread (a param that freezing left without users): zeros, so that the interpreter has every param
      r.emplace(n.name, NDArray(n.type.dtype, std::move(shape)));
      continue;
    }
    const auto bytes = static_cast<size_t>(numel(n.type.shape).value()) * dtype_size(n.type.dtype);
    r.emplace(n.name, NDArray::copy_of(n.type.dtype, std::move(shape), data, bytes));
  }
  return r;
}

}  // namespace tj
