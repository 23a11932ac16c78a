#include "compiler/driver.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "codegen/cpp/build.h"
#include "compiler/program_cache.h"
#include "memory/lifetimes.h"
#include "passes/pipeline.h"
#include "ir/layout.h"
#include "ir/rewriter.h"
#include "passes/specialize.h"
#include "runtime/gemm.h"
#include "runtime/host_program.h"
#include "runtime/thread_pool.h"
#include "support/log.h"
#include "support/progress.h"
#include "tensorjit/error.h"
#include "tune/autotune.h"

namespace tj {

const device::Kind& Device::kind() const {
  if (!kind_) throw Error("the CPU is not a device of the registry");
  return *kind_;
}

std::vector<std::string_view> device_names() {
  std::vector<std::string_view> names = {"cpu"};
  for (const device::Kind* k : device::kinds()) names.push_back(k->name);
  return names;
}

std::string_view device_name(Device d) { return d.is_cpu() ? "cpu" : d.kind().name; }

std::string_view device_about(Device d) { return d.is_cpu() ? "generated C++" : d.kind().about; }

std::string device_list(bool about) {
  const std::vector<std::string_view> names = device_names();
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
    if (about) list += " (" + std::string(device_about(parse_device(names[i]))) + ")";
  }
  return list;
}

Device parse_device(std::string_view name) {
  if (name == "cpu") return Device();
  if (const device::Kind* k = device::find_kind(name)) return Device(*k);
  throw Error("unknown device '" + std::string(name) + "' (" + device_list() + ")");
}

Device requested_device(const CompileOptions& o) {
  if (o.device) return *o.device;
  const char* e = std::getenv("TJ_DEVICE");
  if (!e || !*e) return Device();
  try {
    return parse_device(e);
  } catch (const Error& err) {
    throw Error(std::string("TJ_DEVICE: ") + err.what());
  }
}

namespace {

// Runs and records the stages of one compilation, in order.
class StageRunner {
 public:
  StageRunner(Compilation& c, Stage last) : c_(c), last_(last) {}

  // `body` as stage `name` unless `skip` says why not (or the stage is
  // past `last`: not recorded). A body that returns seconds timed them
  // itself; otherwise the runner times it.
  template <class F>
  void operator()(Stage s, const char* name, const char* skip, F&& body) {
    if (s > last_) return;
    if (skip) {
      c_.stages.push_back({name, 0, skip});
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    if constexpr (std::is_void_v<std::invoke_result_t<F>>) {
      body();
      c_.stages.push_back({name, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), ""});
    } else {
      c_.stages.push_back({name, body(), ""});
    }
  }
  // The stage just recorded, if it ran (to name what it found, or to correct its time).
  StageRecord* ran_last() { return !c_.stages.empty() && c_.stages.back().skipped.empty() ? &c_.stages.back() : nullptr; }

 private:
  Compilation& c_;
  Stage last_;
};


// CompileOptions::autotune, else TJ_AUTOTUNE (anything but empty or 0).
bool autotune_requested(const CompileOptions& o) {
  if (o.autotune) return *o.autotune;
  const char* e = std::getenv("TJ_AUTOTUNE");
  return e && *e && std::strcmp(e, "0") != 0;
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

// The program cache's program becomes the compilation's.
void adopt(Compilation& c, PreparedProgram&& prepared) {
  c.graph = std::move(prepared.graph);
  c.prepared = std::move(prepared.storage);
  c.prepared_constants = std::move(prepared.constants);
}

Executable::Parts parts_of(Compilation& c) {
  return {std::move(c.graph), std::move(c.schedule), std::move(c.prepared), std::move(c.prepared_constants)};
}

}  // namespace

bool run_stages(Compilation& c, const Graph* traced, const Bindings& params, const CompileOptions& o, Stage last) {
  StageRunner stage(c, last);
  c.device = requested_device(o);
  const bool from_cache = traced == nullptr;  // compile_prepared: the key is given
  const bool generates = last >= Stage::emit || o.program_cache || from_cache;
  const bool control_flow = traced && has_control_flow(*traced);
  std::optional<PreparedProgram> prepared;
  std::optional<GemmWarmup> warm;  // meanwhile, from when the graph is known
  if (traced && last >= Stage::build && needs_gemm_warmup(*traced)) warm.emplace();

  stage(Stage::probe, "compiler probe", generates ? nullptr : "no code is generated", [&] { c.cxx = find_compiler(); });
  if (!from_cache && c.cxx && o.program_cache && !control_flow) c.key = program_key(*traced, params, o);
  const char* no_lookup = from_cache          ? (c.cxx ? nullptr : "no C++ compiler")
                          : !o.program_cache  ? "CompileOptions::program_cache is off"
                          : !c.cxx            ? "no C++ compiler"
                          : control_flow      ? "a graph with control flow"
                          : c.key.empty()     ? "this build's identity is unknown"
                                              : nullptr;
  stage(Stage::cache_lookup, "program cache lookup", no_lookup, [&] {
    prepared = load_program(c.key);
    c.program_cache_hit = prepared.has_value();
  });
  if (c.program_cache_hit) stage.ran_last()->name = "program cache hit";
  if (from_cache) {
    if (!c.program_cache_hit) return false;
    // Every weight must be a prepared constant: there are no others to bind.
    auto users = users_of(prepared->graph);
    for (ValueId p : prepared->graph.params())
      if (!users[static_cast<size_t>(p)].empty() && !prepared->constants.count(prepared->graph.node(p).name)) return false;
    if (last >= Stage::build && needs_gemm_warmup(prepared->graph)) warm.emplace();
  }
  stage(Stage::passes, "passes", c.program_cache_hit ? "program cache hit" : nullptr, [&] {
    c.graph = *traced;
    PipelineOptions po;
    po.pass.freeze_values = &params;
    po.pass.weights = o.weights;
    run_pipeline(c.graph, o.passes.empty() ? default_pipeline(true) : o.passes, po);
  });
  stage(Stage::cache_store, "program cache store", c.program_cache_hit ? "program cache hit" : no_lookup, [&] {
    try {
      prepared = store_program(c.key, c.graph);
    } catch (const Error& e) {  // a graph whose text does not read back: compiled as it is, not cached
      if (log_enabled("compile")) std::fprintf(stderr, "[compile] program cache: not used: %s\n", e.what());
    }
  });
  if (prepared) adopt(c, std::move(*prepared));

  // From here on the graph runs as kernels, unless the host or the interpreter runs it.
  const bool cpu = c.device.is_cpu();
  if (generates && has_control_flow(c.graph)) {
    if (c.cxx) c.form = Form::host;  // its parts on the device, if one is asked for
    else if (!cpu) throw Unsupported("a graph with control flow runs on the CPU only (device " + std::string(device_name(c.device)) + ")");
    else c.form = Form::interpreter;
  } else if (generates && !c.cxx && cpu) {
    c.form = Form::interpreter;
  }
  const char* not_kernels = c.form == Form::host          ? "control flow: the host program compiles its parts"
                            : c.form == Form::interpreter ? "no C++ compiler: the interpreter runs the graph"
                                                          : nullptr;
  c.hint = size_hint(c.graph, o.size_hint);  // a size never seen: decide as for a small one
  stage(Stage::fusion, "fusion", not_kernels, [&] {
    // Convolutions the target has no kernel for become windows and products.
    // GPUs have a kernel for every form (codegen/gpu/kernels/conv.cpp). On
    // the CPU: 16-bit types, and channels-last forms without their kernel
    // (f32, at most 2 spatial dims, weights packed by pack_conv_weights).
    // Max and sum pools keep a kernel channels last, f32, over 2 spatial dims.
    auto lowered = [&](const Node& n) {
      if (!cpu) return false;
      if (n.type.dtype != DType::f32 && n.type.dtype != DType::f64) return true;
      if (is_pool(n.op)) return n.type.dtype != DType::f32 || n.type.rank() != 4 || !n.attr_bool("channels_last");
      if (!n.attr_bool("channels_last")) return false;
      const ValueId w = n.inputs[1];
      const int64_t lanes = conv_quad_lanes(c.graph.type(w).shape, n.attr_int("groups"));
      const bool packed = lanes > 0 ? packed_conv_quads(c.graph, w, lanes) >= 0 : packed_conv_taps(c.graph, w) >= 0;
      return n.type.dtype != DType::f32 || n.type.rank() > 4 || !packed;
    };
    if (lower_convs_where(c.graph, lowered)) {
      PassOptions po;
      cse(c.graph, po);
      dce(c.graph, po);
    }
    FusionOptions fo = o.fusion;
    fo.size_hint = c.hint;
    fo.conv_reductions = cpu && fo.epilogue;  // the C++ emitter's conv kernels sum positions
    fo.library_vector_floats = cpu ? generated_vector_floats() : 0;  // and take some grouped convs by the matrix library
    c.schedule = fuse(c.graph, fo, o.donate);
  });
  // Reordering weighs buffer sizes: at the hint (the same graph, sizes bound).
  stage(Stage::reorder, "reorder", not_kernels ? not_kernels : !o.reorder ? "CompileOptions::reorder is off" : nullptr, [&] {
    c.schedule = reorder_schedule(size_symbols(c.graph).empty() ? c.graph : specialize(c.graph, c.hint), c.schedule);
  });
  stage(Stage::emit, "emit", not_kernels, [&] {
    if (cpu) c.program = emit_cpp(c.graph, c.schedule, c.hint, autotune_requested(o));
    else c.gpu = gpu::emit(c.graph, c.schedule, c.device.kind().target, c.hint);
  });
  stage(Stage::build, "build", not_kernels, [&] {
    if (!cpu) {  // the device's compiler, and the weights uploaded
      c.exe = Executable::load_on_device(c.device.kind(), parts_of(c), std::move(c.gpu), params, {});
      return;
    }
    // Past 2 s (a convnet's first compile), where someone watches: the stage and its kernels.
    Progress progress("compiling", std::to_string(c.program.kernel_symbols.size()) + " kernels with " + c.cxx->path);
    c.built = build_library(c.program.source, *c.cxx);
  });
  if (StageRecord* built = stage.ran_last(); built && cpu && built->name == "build") {
    built->seconds -= c.built.load_seconds;  // the load is its own stage, below
    if (c.built.cache_hit) built->name = "build (cache hit)";
  }
  const char* on_device = cpu ? nullptr : "on a device: the build loads and lays out";
  stage(Stage::load, "load", not_kernels ? not_kernels : on_device, [&] { return c.built.load_seconds; });  // timed by the build
  stage(Stage::layout, "layout", not_kernels ? not_kernels : on_device, [&] {
    const ThreadPool& pool = o.pool ? *o.pool : ThreadPool::global();  // the threads generated code splits its work over
    c.exe = Executable::load(parts_of(c), std::move(c.program), c.built, params, pool, {});
  });
  TuningTarget target;
  if (c.exe && cpu) target = c.exe->tuning_target(c.hint);
  const bool tunable = target.tunable && !target.tunable->empty();
  stage(Stage::autotune, "autotune", not_kernels ? not_kernels : !tunable ? "no tunable kernels" : nullptr, [&] {
    CompileStats s = c.exe->stats();
    tune_program(target, s);
    c.exe->set_stats(s);
    return s.tuning_seconds;
  });
  return true;
}

std::string stages_text(const Compilation& c) {
  std::string text;
  for (const StageRecord& r : c.stages) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %.1f ms", r.seconds * 1e3);
    text += (text.empty() ? "" : ", ") + r.name + (r.skipped.empty() ? std::string(buf) : " skipped (" + r.skipped + ")");
  }
  return text;
}

std::vector<std::pair<std::string, double>> stage_seconds(const Compilation& c) {
  std::vector<std::pair<std::string, double>> r;
  for (const StageRecord& s : c.stages)
    if (s.skipped.empty()) r.emplace_back(s.name, s.seconds);
  return r;
}

}  // namespace tj
