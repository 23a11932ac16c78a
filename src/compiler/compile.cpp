#include "compiler/compile.h"

#include <cstdio>
#include <mutex>

#include "compiler/driver.h"
#include "ir/rewriter.h"
#include "ir/text.h"
#include "runtime/gemm.h"
#include "runtime/host_program.h"
#include "runtime/thread_pool.h"
#include "support/log.h"
#include "tensorjit/error.h"
#include "tune/autotune.h"

namespace tj {

namespace {

void warn_once_no_compiler() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::fprintf(stderr,
                 "tensorjit: warning: no C++ compiler found ($TJ_CXX, c++, g++, clang++); running on the interpreter\n");
  });
}

// oneDNN's kernels are made while a program compiles, when a product of more
// than one row will need them (one row is a GEMV of the generated code's).
bool needs_gemm_warmup(const Graph& g) {
  for (const Node& n : g.nodes()) {
    const auto& s = n.type.shape;
    if (n.op == Op::matmul && n.type.dtype == DType::f32 && s.size() >= 2 && s[s.size() - 2] != Dim(1)) return true;
  }
  return false;
}

void log_stages(const Compilation& c, const Executable& e) {
  if (!log_enabled("compile")) return;
  double total = 0;
  std::string line;
  for (const auto& [name, sec] : c.stages) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ", %s %.1f ms", name.c_str(), sec * 1e3);
    total += sec, line += buf;
  }
  const std::string where = e.device() == "cpu" ? "" : " on " + e.device();
  std::fprintf(stderr, "[compile] %zu kernels%s in %.3f s: %s\n", e.schedule().kernels.size(), where.c_str(), total, line.substr(2).c_str());
}

Executable::Parts parts_of(Compilation& c) {
  return {std::move(c.graph), std::move(c.schedule), std::move(c.prepared), std::move(c.prepared_constants)};
}

// The optimized graph's kernels for a GPU (codegen/gpu), run by a
// DeviceProgram: weights uploaded once, a launch list replayed per call.
Executable finish_on_device(Compilation& c, const Bindings& params, const CompileOptions& o, Device dev, CompileStats stats) {
  if (has_control_flow(c.graph)) throw Unsupported("a graph with control flow runs on the CPU only (device " + std::string(device_name(dev)) + ")");
  schedule_program(c, o);
  gpu::Program p = gpu::emit(c.graph, c.schedule, dev == Device::opencl ? gpu::Target::opencl : gpu::Target::cuda, c.hint);
  c.stage("emit");
  Executable e = Executable::load_on_device(parts_of(c), std::move(p), params, std::move(stats));
  c.stage("build");
  CompileStats s = e.stats();
  s.stage_seconds = c.stages;
  e.set_stats(std::move(s));
  log_stages(c, e);
  return e;
}

// The optimized program (c.graph) as what runs it: host control flow, a
// device's kernels, the interpreter (no C++ compiler), or generated C++
// laid out in memory and, where it has candidates, tuned.
Executable finish(Compilation& c, const Bindings& params, const CompileOptions& o) {
  CompileStats stats;
  stats.program_cache_hit = c.program_cache_hit;
  stats.program_key = c.key;
  if (c.cxx && has_control_flow(c.graph)) {  // the host runs the control flow, compiled graphs the rest
    CompileOptions regions = o;
    regions.donate.clear();  // regions and parts have their own inputs and outputs: the host copies
    CompileOptions part = regions;
    part.passes = {"dce"};  // the graph is optimized already; regions get the default pipeline
    return Executable::on_host(
        std::move(c.graph), [&](const Graph& g, bool region) { return compile(g, {}, region ? regions : part); }, std::move(stats));
  }
  if (const Device dev = requested_device(o); dev != Device::cpu) return finish_on_device(c, params, o, dev, std::move(stats));
  if (!c.cxx) {
    warn_once_no_compiler();
    return Executable::interpreted(std::move(c.graph), params, std::move(stats));
  }
  generate(c, o);
  const BuildResult& built = c.built;
  stats.cache_hit = built.cache_hit;
  stats.compile_seconds = built.compile_seconds;
  stats.load_seconds = built.load_seconds;
  stats.source_path = built.source_path;
  const ThreadPool& pool = o.pool ? *o.pool : ThreadPool::global();  // the threads generated code splits its work over
  Executable e = Executable::load(parts_of(c), std::move(c.program), built, params, pool, std::move(stats));
  c.stage("layout");
  CompileStats s = e.stats();
  TuningTarget target = e.tuning_target(c.hint);
  if (!target.tunable->empty()) {
    tune_program(target, s);
    c.stage("autotune", s.tuning_seconds);
  }
  s.stage_seconds = c.stages;
  e.set_stats(std::move(s));
  log_stages(c, e);
  return e;
}

}  // namespace

Executable compile(const Graph& graph, const Bindings& params, const CompileOptions& o) {
  for (ValueId p : graph.params()) {
    const Node& n = graph.node(p);
    auto it = params.find(n.name);
    if (it == params.end()) throw Error("compile: no value for param '" + n.name + "'");
    const NDArray& a = it->second;
    bool fits = a.dtype() == n.type.dtype && a.shape().size() == n.type.shape.size();
    for (size_t d = 0; fits && d < a.shape().size(); ++d) fits = !n.type.shape[d].is_const() || n.type.shape[d].value() == a.shape()[d];
    if (!fits) throw Error("compile: param '" + n.name + "' is " + a.type_str() + ", expected " + n.type.str());
  }
  // The graph as compiled (its weights still params): `tjc bench FILE
  // --profile` times its kernels. Constants over 4096 elements are summarized.
  if (log_enabled("ir")) std::fprintf(stderr, "[ir] compiling:\n%s", print_graph(graph, PrintOptions{4096}).c_str());
  std::optional<GemmWarmup> warm;
  if (needs_gemm_warmup(graph)) warm.emplace();
  Compilation c;
  optimize(c, graph, params, o);
  return finish(c, params, o);
}

std::optional<Executable> compile_prepared(const std::string& program_key, const CompileOptions& o) {
  Compilation c;
  if (!load_prepared(c, program_key)) return std::nullopt;
  auto users = users_of(c.graph);
  for (ValueId p : c.graph.params())  // every weight must be a prepared constant: there are no others
    if (!users[static_cast<size_t>(p)].empty() && !c.prepared_constants.count(c.graph.node(p).name)) return std::nullopt;
  std::optional<GemmWarmup> warm;
  if (needs_gemm_warmup(c.graph)) warm.emplace();
  return finish(c, {}, o);
}

}  // namespace tj
