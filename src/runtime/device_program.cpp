#include "runtime/device_program.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include "memory/lifetimes.h"
#include "passes/specialize.h"
#include "runtime/call_checks.h"
#include "support/timing.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

// TJ_REPLAY=0: launch the list on every call instead of replaying what was
// recorded (a CUDA Graph, an OpenCL command buffer): what replay saves.
bool replay_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("TJ_REPLAY");
    return !e || std::string(e) != "0";
  }();
  return on;
}

using device::Loc;

// Memory for one set of sizes (a shape bucket): the arena, temporaries,
// scratch, inputs and outputs' copies; where each buffer parameter points;
// and the launch list's record at these sizes (a CUDA Graph, an OpenCL
// command buffer), where the device makes one.
struct Layout {
  std::vector<int> owned;
  std::vector<Loc> loc;  // per buffer id: values, then the scratch, then outputs' copies
  std::vector<std::vector<int64_t>> input_shapes, output_shapes;
  int graph = -1;
  uint64_t used = 0;
};

constexpr size_t kMaxLayouts = 8;  // sizes held at once (a bucketed policy's buckets), least recently used dropped

}  // namespace

struct DeviceProgram::State {
  Graph graph;
  Schedule schedule;
  gpu::Program prog;
  std::unique_ptr<device::Backend> device;
  std::vector<Loc> weights;  // per value: its uploaded data
  Loc status;
  std::map<SymEnv, Layout> layouts;
  Layout* current = nullptr;
  SymEnv current_sizes;  // current's key
  uint64_t calls = 0;
  std::vector<const gpu::Launch*> all;  // checks, launches, outputs: the kernels' numbering
  std::vector<ValueId> donated;         // inputs written in place, read back after each call

  Layout& bind(const SymEnv& env);
  void set_arguments(const Layout& l, const SymEnv& env);
  void enqueue(size_t from, size_t to, const SymEnv& env);
  size_t bytes(ValueId v, const SymEnv& env) const {
    return static_cast<size_t>(numel(graph.type(v).shape).eval(env)) * dtype_size(graph.type(v).dtype);
  }
};

DeviceProgram::DeviceProgram(const device::Kind& kind, const Graph& g, const Schedule& s, gpu::Program p, const std::vector<const void*>& held)
    : s_(std::make_unique<State>()) {
  State& st = *s_;
  if (p.target != kind.target)
    throw Error("device program: rendered as " + std::string(gpu::target_name(p.target)) + ", which " + std::string(kind.name) + " does not run");
  st.device = kind.open();
  st.graph = g;
  st.schedule = s;
  st.prog = std::move(p);
  for (const auto* list : {&st.prog.checks, &st.prog.launches, &st.prog.outputs})
    for (const auto& l : *list) st.all.push_back(&l);
  std::vector<std::string> names;
  for (const gpu::Launch* l : st.all) names.push_back(l->name);
  std::vector<bool> donated(g.size(), false);
  for (size_t v = 0; v < g.size(); ++v)
    if (ValueId into = s.in_place[v]; into >= 0) donated[static_cast<size_t>(into)] = true;
  for (ValueId v : g.inputs())
    if (donated[static_cast<size_t>(v)]) st.donated.push_back(v);
  st.device->load(st.prog.source, names);
  st.status = {st.device->buffer(sizeof(int)), 0};
  st.weights.assign(g.size(), Loc{});
  for (size_t v = 0; v < g.size() && v < held.size(); ++v) {  // weights, once
    if (!held[v]) continue;
    const size_t n = st.bytes(static_cast<ValueId>(v), {});
    st.weights[v] = {st.device->buffer(n), 0};
    st.device->write(st.weights[v], held[v], n);
  }
  if (size_symbols(g).empty()) st.bind({});
}

DeviceProgram::~DeviceProgram() = default;

// The layout for the sizes `env`, made the first time: the activations'
// arena as the memory plan lays it out, temporaries, scratch, each input
// and each output's copy. Arguments are set for it when it becomes current.
Layout& DeviceProgram::State::bind(const SymEnv& env) {
  auto it = layouts.find(env);
  if (it == layouts.end()) {
    if (layouts.size() >= kMaxLayouts) {  // the least recently used sizes give their memory back
      auto lru = std::min_element(layouts.begin(), layouts.end(), [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
      if (&lru->second == current) current = nullptr;
      if (lru->second.graph >= 0) device->drop(lru->second.graph);
      for (int b : lru->second.owned) device->release(b);
      layouts.erase(lru);
    }
    Layout l;
    auto own = [&](int64_t n) {
      l.owned.push_back(device->buffer(static_cast<size_t>(std::max<int64_t>(n, 1))));
      return l.owned.back();
    };
    const Graph& g = graph;
    const Graph concrete = size_symbols(g).empty() ? Graph() : specialize(g, env);
    const ActivationPlan plan = plan_activations(size_symbols(g).empty() ? g : concrete, schedule);
    l.loc = weights;
    l.loc.resize(g.size() + 1 + g.outputs().size());
    const int arena = own(plan.plan.peak_bytes);
    for (const auto& b : plan.buffers) l.loc[static_cast<size_t>(b.value)] = {arena, plan.plan.offsets[static_cast<size_t>(b.slot)]};
    const TemporaryLayout tl = lay_out_temporaries(prog.layout, env);
    const int temps = own(tl.bytes);
    for (size_t i = 0; i < prog.layout.temporaries.size(); ++i) l.loc[static_cast<size_t>(prog.layout.temporaries[i])] = {temps, tl.offsets[i]};
    int64_t scratch = 0;
    for (const Dim& d : prog.layout.scratch_sizes) scratch = std::max(scratch, d.eval(env));
    l.loc[g.size()] = {own(scratch), 0};
    for (ValueId v : g.inputs()) {
      l.input_shapes.push_back(eval_shape(g.type(v).shape, env));
      l.loc[static_cast<size_t>(v)] = {own(static_cast<int64_t>(bytes(v, env))), 0};
    }
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      l.output_shapes.push_back(eval_shape(g.type(g.outputs()[i]).shape, env));
      l.loc[g.size() + 1 + i] = {own(static_cast<int64_t>(bytes(g.outputs()[i], env))), 0};
    }
    for (size_t v = 0; v < g.size(); ++v)  // written in place of a donated input
      if (ValueId into = schedule.in_place[v]; into >= 0) l.loc[v] = l.loc[static_cast<size_t>(into)];
    it = layouts.emplace(env, std::move(l)).first;
  }
  Layout& l = it->second;
  l.used = ++calls;
  if (current != &l) {
    set_arguments(l, env);
    current = &l;
    current_sizes = env;
  }
  return l;
}

void DeviceProgram::State::set_arguments(const Layout& l, const SymEnv& env) {
  std::vector<int64_t> sizes;
  for (const auto& x : prog.layout.symbols) sizes.push_back(env.at(x));
  for (size_t k = 0; k < all.size(); ++k) {
    std::vector<Loc> buffers;
    for (ValueId v : all[k]->buffers) {
      const Loc& at = l.loc[static_cast<size_t>(v)];
      if (at.buffer < 0) throw Error("device program: " + all[k]->name + " reads %" + std::to_string(v) + ", which has no memory");
      buffers.push_back(at);
    }
    device->arguments(static_cast<int>(k), buffers, sizes, status);
  }
}

// Launches [from, to) of `all`, at the sizes `env`.
void DeviceProgram::State::enqueue(size_t from, size_t to, const SymEnv& env) {
  for (size_t k = from; k < to; ++k) {
    const gpu::Launch& l = *all[k];
    int64_t items = l.items.eval(env);
    for (const auto& [d, t] : l.tiles) items *= (d.eval(env) + t - 1) / t;
    if (items <= 0) continue;
    const auto group = static_cast<size_t>(l.group);
    device->launch(static_cast<int>(k), (static_cast<size_t>(items) + group - 1) / group, group);
  }
}

void DeviceProgram::run(Bindings& inputs, std::vector<NDArray>& outputs, const RunOptions& o) {
  State& s = *s_;
  const Graph& g = s.graph;
  check_input_names(g, inputs);
  const SymEnv env = size_symbols(g).empty() ? SymEnv{} : sizes_from_inputs(g, inputs);
  Layout& l = s.bind(env);
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const NDArray& a = checked_input(g, g.inputs()[i], inputs, l.input_shapes[i]);
    s.device->write(l.loc[static_cast<size_t>(g.inputs()[i])], a.raw(), a.nbytes());
  }
  int status = 0;
  s.device->write(s.status, &status, sizeof status);
  auto check_status = [&] {
    s.device->read(s.status, &status, sizeof status);
    if (status != 0) throw Error(status_message(status));
  };
  const size_t checks = s.prog.checks.size(), total = checks + s.prog.launches.size() + s.prog.outputs.size();
  if (checks > 0) {  // before any kernel runs: a bad index leaves donated inputs as they were
    s.enqueue(0, checks, env);
    check_status();
  }
  // The kernels and the outputs' copies: replayed from the record made at
  // these sizes (a CUDA Graph, an OpenCL command buffer), or launched.
  if (l.graph < 0) {
    auto launch_all = [&] { s.enqueue(checks, total, env); };
    if (replay_enabled()) l.graph = s.device->record(launch_all);
    else launch_all();
  }
  if (l.graph >= 0) s.device->replay(l.graph);
  check_status();
  outputs.resize(g.outputs().size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const ValueId into = s.schedule.in_place[static_cast<size_t>(g.outputs()[i])];
    if (!o.copy_donated_outputs && into >= 0) continue;
    DType t = g.type(g.outputs()[i]).dtype;
    if (outputs[i].dtype() != t || outputs[i].shape() != l.output_shapes[i] || !outputs[i].raw()) outputs[i] = NDArray(t, l.output_shapes[i]);
    s.device->read(l.loc[g.size() + 1 + i], outputs[i].raw(), outputs[i].nbytes());
  }
  // Donated inputs written in place: the caller's arrays get their new contents.
  for (ValueId v : s.donated) {
    NDArray& a = inputs.at(g.node(v).name);
    s.device->read(l.loc[static_cast<size_t>(v)], a.raw(), a.nbytes());
  }
}

std::vector<double> DeviceProgram::profile(Bindings& inputs, int reps) {
  State& s = *s_;
  std::vector<NDArray> out;
  run(inputs, out, {});  // binds the sizes, writes the inputs
  const SymEnv env = s.current_sizes;
  const size_t checks = s.prog.checks.size();
  std::vector<std::vector<double>> t(s.schedule.kernels.size());
  for (int r = 0; r < reps; ++r) {
    std::vector<double> sum(t.size(), 0.0);
    for (size_t i = 0; i < s.prog.launches.size(); ++i) {
      s.device->finish();
      const auto t0 = Clock::now();
      s.enqueue(checks + i, checks + i + 1, env);
      s.device->finish();
      sum[static_cast<size_t>(s.prog.launches[i].kernel)] += seconds_since(t0);
    }
    for (size_t k = 0; k < t.size(); ++k) t[k].push_back(sum[k]);
  }
  std::vector<double> med;
  for (const auto& v : t) med.push_back(quantile(v, 0.5));
  return med;
}

std::string DeviceProgram::device() const { return s_->device->name(); }

size_t DeviceProgram::launches() const { return s_->prog.launches.size(); }

}  // namespace tj
