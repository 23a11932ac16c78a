#include "runtime/device_program.h"

#include <algorithm>
#include <cstring>

#include "jit/specialize.h"
#include "memory/lifetimes.h"
#include "runtime/opencl.h"
#include "support/log.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

// Where a buffer parameter points: a device buffer and a byte offset in it.
struct Loc {
  int buffer = -1;
  int64_t offset = 0;
};

}  // namespace

struct DeviceProgram::State {
  Graph graph;
  Schedule schedule;
  gpu::Program prog;
  opencl::Context cl;
  std::vector<int> checks, launches, outputs;  // kernel handles
  std::vector<Loc> loc;                        // per buffer id: values, then the scratch, then outputs' copies
  int status = -1;
  std::vector<int> owned;                      // buffers of the current layout (released when sizes change)
  int64_t weight_bytes = 0, layout_bytes = 0;
  bool bound = false;
  SymEnv sizes;
  std::vector<std::vector<int64_t>> input_shapes, output_shapes;

  void bind(const SymEnv& env);
  void set_args(const gpu::Launch& l, int kernel);
  void enqueue(const std::vector<gpu::Launch>& ls, const std::vector<int>& ks);
  size_t bytes(ValueId v, const SymEnv& env) const {
    return static_cast<size_t>(numel(graph.type(v).shape).eval(env)) * dtype_size(graph.type(v).dtype);
  }
};

DeviceProgram::DeviceProgram(const Graph& g, const Schedule& s, gpu::Program p, const std::vector<const void*>& held)
    : s_(std::make_unique<State>()) {
  State& st = *s_;
  if (p.target != gpu::Target::opencl) throw Unsupported("running on CUDA is not built yet (its sources compile: tjc codegen --device cuda)");
  st.graph = g;
  st.schedule = s;
  st.prog = std::move(p);
  // -w: generated code compares a value with itself (lt(m, m)) and declares
  // index variables it may not read; the OpenCL compiler would print that.
  const int program = st.cl.program(st.prog.source, "-w");
  for (const auto& l : st.prog.checks) st.checks.push_back(st.cl.kernel(program, l.name));
  for (const auto& l : st.prog.launches) st.launches.push_back(st.cl.kernel(program, l.name));
  for (const auto& l : st.prog.outputs) st.outputs.push_back(st.cl.kernel(program, l.name));
  st.loc.assign(g.size() + 1 + g.outputs().size(), Loc{});
  st.status = st.cl.buffer(sizeof(int));
  for (size_t v = 0; v < g.size() && v < held.size(); ++v) {  // weights, once
    if (!held[v]) continue;
    const size_t n = st.bytes(static_cast<ValueId>(v), {});
    st.loc[v] = {st.cl.buffer(n), 0};
    st.cl.write(st.loc[v].buffer, held[v], n);
    st.weight_bytes += static_cast<int64_t>(n);
  }
  if (size_symbols(g).empty()) st.bind({});
}

DeviceProgram::~DeviceProgram() = default;

// Memory for the sizes `env`: the activations' arena as the memory plan lays
// it out, temporaries, scratch, each input and each output's copy; then
// every launch's arguments, which stay set until the sizes change.
void DeviceProgram::State::bind(const SymEnv& env) {
  if (bound && env == sizes) return;
  for (int b : owned) cl.release(b);
  owned.clear();
  auto own = [&](int64_t n) {
    owned.push_back(cl.buffer(static_cast<size_t>(std::max<int64_t>(n, 1))));
    return owned.back();
  };
  const Graph& g = graph;
  const Graph concrete = size_symbols(g).empty() ? Graph() : specialize(g, env);
  const ActivationPlan plan = plan_activations(size_symbols(g).empty() ? g : concrete, schedule);
  const int arena = own(plan.plan.peak_bytes);
  for (const auto& b : plan.buffers) loc[static_cast<size_t>(b.value)] = {arena, plan.plan.offsets[static_cast<size_t>(b.slot)]};
  const TemporaryLayout tl = lay_out_temporaries(prog.layout, env);
  const int temps = own(tl.bytes);
  for (size_t i = 0; i < prog.layout.temporaries.size(); ++i) loc[static_cast<size_t>(prog.layout.temporaries[i])] = {temps, tl.offsets[i]};
  int64_t scratch = 0;
  for (const Dim& d : prog.layout.scratch_sizes) scratch = std::max(scratch, d.eval(env));
  loc[g.size()] = {own(scratch), 0};
  layout_bytes = plan.plan.peak_bytes + tl.bytes + scratch;
  input_shapes.clear();
  output_shapes.clear();
  for (ValueId v : g.inputs()) {
    input_shapes.push_back(eval_shape(g.type(v).shape, env));
    loc[static_cast<size_t>(v)] = {own(static_cast<int64_t>(bytes(v, env))), 0};
    layout_bytes += static_cast<int64_t>(bytes(v, env));
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    output_shapes.push_back(eval_shape(g.type(g.outputs()[i]).shape, env));
    loc[g.size() + 1 + i] = {own(static_cast<int64_t>(bytes(g.outputs()[i], env))), 0};
    layout_bytes += static_cast<int64_t>(bytes(g.outputs()[i], env));
  }
  for (size_t v = 0; v < g.size(); ++v)  // written in place of a donated input
    if (ValueId into = schedule.in_place[v]; into >= 0) loc[v] = loc[static_cast<size_t>(into)];
  sizes = env;
  bound = true;
  auto set_all = [&](const std::vector<gpu::Launch>& ls, const std::vector<int>& ks) {
    for (size_t i = 0; i < ls.size(); ++i) set_args(ls[i], ks[i]);
  };
  set_all(prog.checks, checks);
  set_all(prog.launches, launches);
  set_all(prog.outputs, outputs);
}

void DeviceProgram::State::set_args(const gpu::Launch& l, int k) {
  unsigned a = 0;
  for (ValueId v : l.buffers) {
    const Loc& at = loc[static_cast<size_t>(v)];
    if (at.buffer < 0) throw Error("device program: " + l.name + " reads %" + std::to_string(v) + ", which has no memory");
    cl.arg(k, a++, at.buffer);
    cl.arg(k, a++, sizeof(int64_t), &at.offset);
  }
  for (const auto& x : prog.layout.symbols) {
    const int64_t value = sizes.at(x);
    cl.arg(k, a++, sizeof value, &value);
  }
  cl.arg(k, a++, status);
}

void DeviceProgram::State::enqueue(const std::vector<gpu::Launch>& ls, const std::vector<int>& ks) {
  for (size_t i = 0; i < ls.size(); ++i) {
    const gpu::Launch& l = ls[i];
    int64_t items = l.items.eval(sizes);
    for (const auto& [d, t] : l.tiles) items *= (d.eval(sizes) + t - 1) / t;
    if (items <= 0) continue;
    const auto group = static_cast<size_t>(l.group);
    cl.launch(ks[i], {(static_cast<size_t>(items) + group - 1) / group * group}, {group});
  }
}

void DeviceProgram::run(Bindings& inputs, std::vector<NDArray>& outputs, const RunOptions& o) {
  State& s = *s_;
  const Graph& g = s.graph;
  for (const auto& [name, a] : inputs)
    if (g.find(name) < 0 || g.node(g.find(name)).op != Op::input) throw Error("run: unknown input '" + name + "'");
  if (!size_symbols(g).empty()) {  // sizes from the inputs' dims that are one symbol
    SymEnv env;
    for (ValueId v : g.inputs()) {
      auto it = inputs.find(g.node(v).name);
      const auto& shape = g.type(v).shape;
      if (it == inputs.end() || it->second.shape().size() != shape.size()) continue;
      for (size_t d = 0; d < shape.size(); ++d) {
        auto syms = shape[d].symbols();
        if (syms.size() == 1 && shape[d] == Dim::symbol(syms[0])) env.emplace(syms[0], it->second.shape()[d]);
      }
    }
    for (const auto& x : size_symbols(g))
      if (!env.count(x)) throw Error("run: no input gives the size " + x);
    s.bind(env);
  }
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    ValueId v = g.inputs()[i];
    const Node& n = g.node(v);
    auto it = inputs.find(n.name);
    if (it == inputs.end()) throw Error("run: missing input '" + n.name + "' of type " + n.type.str());
    const NDArray& a = it->second;
    if (a.dtype() != n.type.dtype || a.shape() != s.input_shapes[i])
      throw Error("run: input '" + n.name + "' is " + a.type_str() + ", expected " + n.type.str());
    if (!a.raw()) throw Error("run: input '" + n.name + "' holds no data (a default-constructed array)");
    s.cl.write(s.loc[static_cast<size_t>(v)].buffer, a.raw(), a.nbytes());
  }
  int status = 0;
  s.cl.write(s.status, &status, sizeof status);
  auto check_status = [&] {
    s.cl.read(s.status, &status, sizeof status);
    if (status != 0)
      throw Error(status == 3   ? "run: kv_write position outside the cache"
                  : status == 2 ? "run: integer division by zero"
                                : "run: gather or scatter_add index out of range");
  };
  if (!s.prog.checks.empty()) {  // before any kernel runs: a bad index leaves donated inputs as they were
    s.enqueue(s.prog.checks, s.checks);
    check_status();
  }
  s.enqueue(s.prog.launches, s.launches);
  s.enqueue(s.prog.outputs, s.outputs);
  check_status();
  outputs.resize(g.outputs().size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const ValueId into = s.schedule.in_place[static_cast<size_t>(g.outputs()[i])];
    if (!o.copy_donated_outputs && into >= 0) continue;
    DType t = g.type(g.outputs()[i]).dtype;
    if (outputs[i].dtype() != t || outputs[i].shape() != s.output_shapes[i] || !outputs[i].raw()) outputs[i] = NDArray(t, s.output_shapes[i]);
    s.cl.read(s.loc[g.size() + 1 + i].buffer, outputs[i].raw(), outputs[i].nbytes());
  }
  // Donated inputs written in place: the caller's arrays get their new contents.
  std::vector<bool> back(g.size(), false);
  for (size_t v = 0; v < g.size(); ++v)
    if (ValueId into = s.schedule.in_place[v]; into >= 0) back[static_cast<size_t>(into)] = true;
  for (ValueId v : g.inputs())
    if (back[static_cast<size_t>(v)]) {
      NDArray& a = inputs.at(g.node(v).name);
      s.cl.read(s.loc[static_cast<size_t>(v)].buffer, a.raw(), a.nbytes());
    }
}

std::string DeviceProgram::device() const {
  const auto& d = s_->cl.device();
  return "OpenCL: " + d.name + " (" + d.platform + ")";
}

size_t DeviceProgram::launches() const { return s_->prog.launches.size(); }

int64_t DeviceProgram::device_bytes() const { return s_->weight_bytes + s_->layout_bytes; }

}  // namespace tj
