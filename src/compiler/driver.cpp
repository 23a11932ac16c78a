#include "compiler/driver.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "compiler/program_cache.h"
#include "memory/lifetimes.h"
#include "passes/pipeline.h"
#include "passes/specialize.h"
#include "runtime/host_program.h"
#include "support/log.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

// CompileOptions::autotune, else TJ_AUTOTUNE (anything but empty or 0).
bool autotune_requested(const CompileOptions& o) {
  if (o.autotune) return *o.autotune;
  const char* e = std::getenv("TJ_AUTOTUNE");
  return e && *e && std::strcmp(e, "0") != 0;
}

}  // namespace

std::string_view device_name(Device d) {
  switch (d) {
    case Device::cpu: return "cpu";
    case Device::opencl: return "opencl";
    case Device::cuda: return "cuda";
  }
  return "?";
}

Device parse_device(std::string_view name) {
  for (Device d : {Device::cpu, Device::opencl, Device::cuda})
    if (name == device_name(d)) return d;
  throw Error("unknown device '" + std::string(name) + "' (cpu, opencl or cuda)");
}

Device requested_device(const CompileOptions& o) {
  if (o.device) return *o.device;
  const char* e = std::getenv("TJ_DEVICE");
  if (!e || !*e) return Device::cpu;
  try {
    return parse_device(e);
  } catch (const Error& err) {
    throw Error(std::string("TJ_DEVICE: ") + err.what());
  }
}

void Compilation::stage(std::string name) {
  auto now = std::chrono::steady_clock::now();
  stages.emplace_back(std::move(name), std::chrono::duration<double>(now - last_).count());
  last_ = now;
}

void Compilation::stage(std::string name, double seconds) {
  stages.emplace_back(std::move(name), seconds);
  last_ = std::chrono::steady_clock::now();
}

namespace {

// The program cache's program becomes the compilation's.
void adopt(Compilation& c, PreparedProgram&& prepared) {
  c.graph = std::move(prepared.graph);
  c.prepared = std::move(prepared.storage);
  c.prepared_constants = std::move(prepared.constants);
}

}  // namespace

void optimize(Compilation& c, const Graph& traced, const Bindings& params, const CompileOptions& o) {
  c.cxx = find_compiler();
  c.stage("compiler probe");
  // A graph compiled before, with the same weights and options: its
  // optimized form and prepared constants come from the program cache, and
  // the passes do not run.
  bool cacheable = c.cxx && o.program_cache && !has_control_flow(traced);
  std::string key = cacheable ? program_key(traced, params, o) : "";
  cacheable &= !key.empty();  // no key: the compiler's identity is unknown
  c.key = key;
  std::optional<PreparedProgram> prepared = cacheable ? load_program(key) : std::nullopt;
  c.program_cache_hit = prepared.has_value();
  if (cacheable) c.stage(prepared ? "program cache hit" : "program cache lookup");
  if (!prepared) {
    c.graph = traced;
    PipelineOptions po;
    po.pass.freeze_values = &params;
    po.pass.weights = o.weights;
    run_pipeline(c.graph, o.passes.empty() ? default_pipeline(true) : o.passes, po);
    c.stage("passes");
    if (cacheable) {
      try {
        prepared = store_program(key, c.graph);
      } catch (const Error& e) {  // a graph whose text does not read back: compiled as it is, not cached
        if (log_enabled("compile")) std::fprintf(stderr, "[compile] program cache: not used: %s\n", e.what());
      }
      c.stage("program cache store");
    }
  }
  if (prepared) adopt(c, std::move(*prepared));
}

bool load_prepared(Compilation& c, const std::string& key) {
  c.cxx = find_compiler();
  c.stage("compiler probe");
  if (!c.cxx || key.empty()) return false;
  std::optional<PreparedProgram> prepared = load_program(key);
  if (!prepared) return false;
  c.key = key;
  c.program_cache_hit = true;
  adopt(c, std::move(*prepared));
  c.stage("program cache hit");
  return true;
}

namespace {

Schedule fuse_at(const Graph& g, const FusionOptions& fusion, const SymEnv& hint, const std::vector<Donation>& donate = {}) {
  FusionOptions fo = fusion;
  fo.size_hint = hint;
  return fuse(g, fo, donate);
}

// Reordering weighs buffer sizes: at the hint (the same graph, sizes bound).
Schedule reorder_at(const Graph& g, const Schedule& s, const SymEnv& hint) {
  return reorder_schedule(size_symbols(g).empty() ? g : specialize(g, hint), s);
}

}  // namespace

Schedule schedule_kernels(const Graph& g, const FusionOptions& fusion, bool reorder, const SymEnv& hint) {
  Schedule s = fuse_at(g, fusion, hint);
  return reorder ? reorder_at(g, s, hint) : s;
}

void schedule_program(Compilation& c, const CompileOptions& o) {
  const Graph& g = c.graph;
  c.hint = size_hint(g, o.size_hint);  // a size never seen: decide as for a small one
  c.schedule = fuse_at(g, o.fusion, c.hint, o.donate);
  c.stage("fusion");
  if (o.reorder) c.schedule = reorder_at(g, c.schedule, c.hint);
  c.stage("reorder");
}

void generate(Compilation& c, const CompileOptions& o) {
  if (!c.cxx) throw Error("compile: no C++ compiler to generate code for");
  const Graph& g = c.graph;
  schedule_program(c, o);
  c.program = emit_cpp(g, c.schedule, c.hint, autotune_requested(o));
  c.stage("emit");
  auto t0 = std::chrono::steady_clock::now();
  c.built = build_library(c.program.source, *c.cxx);
  double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  c.stage(c.built.cache_hit ? "build (cache hit)" : "build", total - c.built.load_seconds);
  c.stage("load", c.built.load_seconds);
}

}  // namespace tj
