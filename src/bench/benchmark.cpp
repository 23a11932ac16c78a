#include "bench/benchmark.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <thread>

#include <sys/resource.h>

#include "bench/args.h"
#include "bench/autotune_report.h"
#include "bench/busy.h"
#include "bench/weights_report.h"
#include "codegen/gpu/emit.h"
#include "compiler/analysis.h"
#include "compiler/compile.h"
#include "compiler/driver.h"
#include "cost/roofline.h"
#include "io/npy.h"
#include "passes/pipeline.h"
#include "reference/interpreter.h"
#include "support/paths.h"
#include "support/timing.h"
#include "tensorjit/compile.h"
#include "tensorjit/error.h"
#include "tune/calibrate.h"

namespace tj::bench {

namespace {


// The roofline model's profile of the device a program runs on, for the
// GPUs it knows by name; none for the CPU and others.
std::optional<HardwareProfile> device_hardware(const std::string& device) {
  std::string d = device;
  for (char& c : d) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (d.rfind("cuda", 0) != 0) return std::nullopt;
  for (const std::string& n : datasheet_names())
    if (d.find(n) != std::string::npos) return datasheet_profile(n);
  return std::nullopt;
}

std::string ops_header(const std::optional<HardwareProfile>& hw) { return hw ? hw->name + ", ratio)  ops" : "ops"; }

nlohmann::json timing_json(const Timing& t) {
  return {{"median_us", t.median * 1e6}, {"p90_us", t.p90 * 1e6}, {"p99_us", t.p99 * 1e6}, {"max_us", t.max * 1e6}, {"calls", t.calls}};
}

}  // namespace

void bench_child(const BenchOptions& a) {
  // The random weights stand for weights a user has already loaded: their
  // making is not part of the first call (it is reported beside it).
  auto t0 = Clock::now();
  double trace_s = 0;
  Model m = make_model(a.spec, &trace_s);
  double weights_s = seconds_since(t0) - trace_s;
  Executable exe = tj::compile(m.graph, m.params, compile_options(a.spec));
  if (!exe.stats().compiled) throw Error("bench: no C++ compiler, nothing to time");
  Bindings in = m.inputs;
  std::vector<NDArray> out;
  RunOptions in_place;
  in_place.copy_donated_outputs = false;
  exe.run(in, out, in_place);
  double first_call_s = seconds_since(process_start) - weights_s;
  Timing calls = a.budget > 0 ? time_calls([&] { exe.run(in, out, in_place); }, 10, a.budget) : Timing{};
  nlohmann::json stages = nlohmann::json::array();
  stages.push_back({{"stage", "trace"}, {"seconds", trace_s}});
  for (const auto& [name, sec] : exe.stats().stage_seconds) stages.push_back({{"stage", name}, {"seconds", sec}});
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  int64_t weight_bytes = 0;
  for (const auto& [name, w] : m.params) weight_bytes += static_cast<int64_t>(w.nbytes());
  nlohmann::json j = {{"first_call_s", first_call_s},
                      {"weights_s", weights_s},
                      {"weight_mb", static_cast<double>(weight_bytes) / 1e6},
                      {"peak_rss_mb", static_cast<double>(ru.ru_maxrss) * 1024 / 1e6},  // the whole process, its weights included
                      {"cache_hit", exe.stats().cache_hit},
                      {"program_cache_hit", exe.stats().program_cache_hit},
                      {"stages", stages},
                      {"calls", timing_json(calls)}};
  std::printf("%s\n", j.dump().c_str());
}

namespace {

nlohmann::json run_child(const BenchOptions& a, double budget) {
  std::vector<std::string> args = {"bench", "--child", "--seconds", std::to_string(std::max(budget, 0.001))};
  for (const auto& x : spec_argv(a.spec)) args.push_back(x);
  std::string out = run_self(args);
  try {
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return nlohmann::json::parse(out.substr(out.rfind('\n') + 1));  // its last line
  } catch (const std::exception&) {
    throw Error("bench: a fresh process printed no figures: " + out.substr(0, 500));
  }
}

Timing timing_of(const nlohmann::json& j) {
  const auto& c = j.at("calls");
  Timing t;
  t.median = c.at("median_us").get<double>() * 1e-6, t.p90 = c.at("p90_us").get<double>() * 1e-6;
  t.p99 = c.at("p99_us").get<double>() * 1e-6, t.max = c.at("max_us").get<double>() * 1e-6;
  t.calls = c.at("calls").get<size_t>();
  return t;
}

// K fresh processes, each timing its calls; the collapse on a busy machine
// is decided per process, so one run proves nothing.
std::vector<Timing> repeated(const BenchOptions& a, int k) {
  std::vector<Timing> r;
  for (int i = 0; i < k; ++i) r.push_back(timing_of(run_child(a, a.budget)));
  return r;
}

std::string stage_line(const nlohmann::json& child) {
  std::string s;
  for (const auto& st : child.at("stages")) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%s %.0f ms", s.empty() ? "" : ", ", st.at("stage").get<std::string>().c_str(),
                  st.at("seconds").get<double>() * 1e3);
    s += buf;
  }
  return s;
}

// Per run: median and 90th percentile per call; the worst run; the busy
// runs against the quiet median.
void print_fresh_processes(const std::vector<Timing>& quiet, const std::vector<Timing>& busy, int jobs) {
  auto worst = [](const std::vector<Timing>& v, double Timing::*f) {
    double w = 0;
    for (const auto& t : v) w = std::max(w, t.*f);
    return w;
  };
  auto mid = [](const std::vector<Timing>& v, double Timing::*f) {
    std::vector<double> x;
    for (const auto& t : v) x.push_back(t.*f);
    std::sort(x.begin(), x.end());
    return x.empty() ? 0.0 : x[x.size() / 2];
  };
  std::printf("\n%zu fresh processes, compiled per call (us):\n%-12s %10s %10s %13s %10s\n", quiet.size(), "", "median", "p90",
              "worst median", "worst p90");
  auto row = [&](const char* name, const std::vector<Timing>& v) {
    std::printf("%-12s %10.1f %10.1f %13.1f %10.1f\n", name, mid(v, &Timing::median) * 1e6, mid(v, &Timing::p90) * 1e6,
                worst(v, &Timing::median) * 1e6, worst(v, &Timing::p90) * 1e6);
  };
  row("quiet", quiet);
  if (busy.empty()) return;
  std::string b = "busy (" + std::to_string(jobs) + ")";
  row(b.c_str(), busy);
  double qm = mid(quiet, &Timing::median), qp = mid(quiet, &Timing::p90);
  std::printf("%-12s %9.1fx %9.1fx %12.1fx %9.1fx   (busy over quiet; worst p90 over the quiet p90)\n", "slowdown",
              mid(busy, &Timing::median) / qm, mid(busy, &Timing::p90) / qp, worst(busy, &Timing::median) / qm,
              worst(busy, &Timing::p90) / qp);
}

}  // namespace

void run_benchmark(const BenchOptions& a) {
  Model m = make_model(a.spec);
  if (!a.dump.empty()) make_folder(a.dump);  // before the work, so that a bad folder fails fast
  Bindings all = m.params;
  for (const auto& [k, v] : m.inputs) all[k] = v;

  // Cold compile into a fresh folder inside the user's cache (so that
  // TJ_CACHE_DIR, e.g. on a writable disk, is honoured), then a warm load
  // from it; the folder is removed afterwards.
  namespace fs = std::filesystem;
  fs::path dir = fs::path(cache_dir()) / ("bench_" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(dir, ec);  // a stale folder of an earlier process with this id
  make_folder(dir.string());
  const char* old = std::getenv("TJ_CACHE_DIR");
  std::string saved = old ? old : "";
  setenv("TJ_CACHE_DIR", dir.c_str(), 1);
  auto restore = [&] {
    if (old) setenv("TJ_CACHE_DIR", saved.c_str(), 1);
    else unsetenv("TJ_CACHE_DIR");
    fs::remove_all(dir, ec);
  };
  // The first call as a user waits for it, in fresh processes: with the
  // cache empty, then warm. Then, with --busy or --repeat, K processes each
  // timing their calls, quiet and under load.
  std::optional<Executable> compiled;
  nlohmann::json cold, warm;
  std::vector<Timing> quiet_runs, busy_runs;
  int k = a.repeat > 0 ? a.repeat : (a.busy > 0 ? 1 : 0);
  try {
    cold = run_child(a, 0);
    warm = run_child(a, 0);
    compiled = tj::compile(m.graph, m.params, compile_options(a.spec));
    if (k > 0) {
      quiet_runs = repeated(a, k);
      if (a.busy > 0) {
        BusyLoad load(a.busy, 60 + k * (a.budget + 10) * 2, dir.string());
        std::this_thread::sleep_for(std::chrono::seconds(1));  // the jobs under way
        busy_runs = repeated(a, k);
      }
    }
  } catch (...) {
    restore();
    throw;
  }
  restore();
  Executable& exe = *compiled;
  if (!exe.stats().compiled) throw Error("bench: no C++ compiler, nothing to compare");

  // Correctness first, on identical inputs (the compiled run updates caches in place).
  Bindings run_inputs = m.inputs;
  std::vector<NDArray> got;
  exe.run(run_inputs, got);
  if (!a.dump.empty()) {
    for (const auto& [k, v] : all) write_npy((fs::path(a.dump) / (k + ".npy")).string(), v);
    for (size_t i = 0; i < got.size(); ++i) write_npy((fs::path(a.dump) / ("output" + std::to_string(i) + ".npy")).string(), got[i]);
  }
  // Converted weights: against the interpreter on them (the optimized graph
  // holds them); the format's own error is in the formats' report.
  const bool narrow = main_format(a.spec) != DType::f32;
  Bindings converted;
  if (narrow) {
    converted = exe.held_params();
    for (const auto& [k, v] : m.inputs) converted[k] = v;
  }
  Difference d;
  d.max_rel = d.max_abs = std::numeric_limits<double>::quiet_NaN();
  double t_interp = std::numeric_limits<double>::quiet_NaN();
  if (!a.skip_interpreter) {
    d = compare_outputs(got, narrow ? interpret(exe.optimized(), converted, {DType::f32}) : interpret(m.graph, all, {DType::f32}));
    t_interp = time_calls([&] { interpret(m.graph, all, {DType::f32}); }, 3, a.budget).median;
  }
  // As a decode loop runs it: the donated caches are updated in place and
  // not copied out again; and, for reference, with that copy.
  RunOptions in_place;
  in_place.copy_donated_outputs = false;
  Timing comp = time_calls([&] { exe.run(run_inputs, got, in_place); }, 10, a.budget);
  double t_comp = comp.median;
  double t_copy = time_calls([&] { exe.run(run_inputs, got); }, 10, a.budget / 2).median;

  // Work and limits.
  CompileOptions counted = compile_options(a.spec);
  counted.passes = {"dce"};  // the optimized graph as it is, at the sizes given
  counted.size_hint = m.sizes;
  const Schedule s = analysis_stages(exe.optimized(), counted, Stage::fusion).schedule;
  int64_t flops = 0, bytes = 0, weight_bytes = stored_weight_bytes(exe, m.params);
  for (const Kernel& k : s.kernels) flops += k.flops, bytes += k.bytes_read + k.bytes_written;
  Calibration cal;
  if (!load_calibration(&cal)) {
    cal = measure_machine();
    save_calibration(cal);
  }
  bool decode = a.spec.mode == "decode";
  double limit_s = decode ? static_cast<double>(weight_bytes) / cal.stream_bandwidth : static_cast<double>(flops) / cal.sgemm_flops;
  std::string limit_what = decode ? "weight bytes / stream bandwidth" : "FLOPs / sgemm peak";
  if (const auto hw = device_hardware(exe.device())) {  // a GPU: its roofline figures, not this CPU's
    limit_s = decode ? static_cast<double>(weight_bytes) / hw->bandwidth : static_cast<double>(flops) / hw->matmul_flops(dtype_arg(a.spec.dtype));
    limit_what = decode ? "weight bytes / " + hw->name + " bandwidth" : "FLOPs / " + hw->name + " matmul peak";
  }
  double fraction = limit_s / t_comp;
  nlohmann::json formats, model;
  if (a.spec.weights != "f32") {
    FormatsArgs fa;
    fa.formats = a.spec.weights == "all" ? std::vector<DType>{DType::f32, DType::bf16, DType::i8}
                                          : std::vector<DType>{DType::f32, main_format(a.spec)};
    fa.budget = a.budget * static_cast<double>(fa.formats.size());
    fa.compute_limit_s = static_cast<double>(flops) / cal.sgemm_flops;
    formats = weight_formats(m.graph, m.params, m.inputs, fa);
    if (a.spec.model == "llama" && a.spec.ir.empty()) model = model_accuracy(a.spec, fa.formats, a.steps);
  }
  nlohmann::json tuning;
  if (a.autotune) {
    CompileOptions co = compile_options(a.spec);
    co.size_hint = m.sizes;
    tuning = autotune_report(m.graph, m.params, m.inputs, co, a.budget * 4);
  }

  if (a.json) {
    nlohmann::json j = {{"model", a.spec.model},
                        {"config", a.spec.config},
                        {"mode", a.spec.mode},
                        {"interpreter_us", t_interp * 1e6},
                        {"compiled_us", t_comp * 1e6},
                        {"compiled_copying_caches_us", t_copy * 1e6},
                        {"compiled_p90_us", comp.p90 * 1e6},
                        {"speedup", t_interp / t_comp},
                        {"gflops", static_cast<double>(flops) / t_comp / 1e9},
                        {"gbps", static_cast<double>(bytes) / t_comp / 1e9},
                        {"limit", limit_what},
                        {"device", exe.device()},
                        {"limit_us", limit_s * 1e6},
                        {"limit_fraction", fraction},
                        {"first_call_cold", cold},
                        {"first_call_warm", warm},
                        {"kernels", exe.stats().kernels},
                        {"max_rel_diff", d.max_rel},
                        {"sgemm_gflops", cal.sgemm_flops / 1e9},
                        {"stream_gbps", cal.stream_bandwidth / 1e9}};
    if (k > 0) {
      nlohmann::json q = nlohmann::json::array(), b = nlohmann::json::array();
      for (const auto& t : quiet_runs) q.push_back(timing_json(t));
      for (const auto& t : busy_runs) b.push_back(timing_json(t));
      j["fresh_processes"] = {{"quiet", q}, {"busy", b}, {"busy_jobs", a.busy}};
    }
    j["weights"] = a.spec.weights;
    if (!formats.is_null()) j["weight_formats"] = formats;
    if (!model.is_null()) j["model_accuracy"] = model;
    if (!tuning.is_null()) j["autotune"] = tuning;
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  const std::string weights = narrow ? std::string(", weights ") + a.spec.weights : "";
  const char* against = narrow ? "the interpreter on the converted weights" : "interpreter";
  if (a.spec.ir.empty())
    std::printf("%s %s %s (f32%s), %zu kernels; compiled vs %s max rel diff %.2e\n", a.spec.model.c_str(), a.spec.config.c_str(),
                a.spec.mode.c_str(), weights.c_str(), exe.stats().kernels, against, d.max_rel);
  else
    std::printf("%s%s, %zu kernels; compiled vs %s max rel diff %.2e\n", a.spec.ir.c_str(), weights.c_str(), exe.stats().kernels,
                against, d.max_rel);
  if (a.skip_interpreter) std::printf("interpreter: skipped (--skip-interpreter), the outputs are not checked\ncompiled    %12.1f us", t_comp * 1e6);
  else std::printf("interpreter %12.1f us\ncompiled    %12.1f us   %.1fx faster", t_interp * 1e6, t_comp * 1e6, t_interp / t_comp);
  std::printf(t_copy > t_comp * 1.02 || t_copy < t_comp * 0.98 ? "   (%.1f us copying the updated caches out too)\n" : "\n", t_copy * 1e6);
  std::printf("compiled: %.2f GFLOP/s, %.2f GB/s; limit (%s) %.1f us: %.0f%% of it\n", flops / t_comp / 1e9, bytes / t_comp / 1e9,
              limit_what.c_str(), limit_s * 1e6, fraction * 100);
  std::printf("compiled per call: median %.1f us, p90 %.1f us, p99 %.1f us over %zu calls\n", comp.median * 1e6, comp.p90 * 1e6,
              comp.p99 * 1e6, comp.calls);
  std::printf("first call in a fresh process, end to end: cold cache %.2f s (%s); warm cache %.1f ms (%s)\n",
              cold.at("first_call_s").get<double>(), stage_line(cold).c_str(), warm.at("first_call_s").get<double>() * 1e3,
              stage_line(warm).c_str());
  std::printf("peak memory of that process: cold cache %.0f MB, warm cache %.0f MB, of which the weights as loaded %.0f MB\n",
              cold.at("peak_rss_mb").get<double>(), warm.at("peak_rss_mb").get<double>(), cold.at("weight_mb").get<double>());
  if (k > 0) print_fresh_processes(quiet_runs, busy_runs, a.busy);
  if (!formats.is_null()) print_weight_formats(formats);
  if (!model.is_null()) print_model_accuracy(model);
  if (!tuning.is_null()) print_autotune_report(tuning);
  if (a.profile) {
    auto times = exe.profile(run_inputs, 50);
    const Graph& og = exe.optimized();
    // On a GPU the roofline model knows: each kernel's predicted time beside its measured one.
    const std::optional<HardwareProfile> hw = device_hardware(exe.device());
    const DType dt = dtype_arg(a.spec.dtype);
    // Each kernel's rate, and for products and convolutions its share of
    // the calibrated sgemm rate (the roofline's compute peak here).
    std::printf("\n%s\n%4s %-10s %-22s %10s %9s %6s%s  %s\n", exe.device().c_str(), "#", "kind", "space", "median us", "GFLOP/s", "sgemm",
                hw ? "  predicted us (" : "", ops_header(hw).c_str());
    double measured = 0, predicted = 0;
    for (size_t k = 0; k < times.size(); ++k) {
      const Kernel& K = exe.schedule().kernels[k];
      std::string ops;
      for (ValueId v : K.ops) ops += std::string(ops.empty() ? "" : " ") + og.node(v).def().name;
      std::string pred;
      if (hw) {
        const double p = kernel_cost(K, dt, *hw).seconds;
        measured += times[k], predicted += p;
        char buf[64];
        std::snprintf(buf, sizeof buf, " %12.2f %6.2fx", p * 1e6, times[k] / p);
        pred = buf;
      }
      const double rate = times[k] > 0 ? static_cast<double>(K.flops) / times[k] : 0;
      const bool product = K.kind == KernelKind::matmul || K.kind == KernelKind::conv;
      char share[16] = "";
      if (product && cal.sgemm_flops > 0) std::snprintf(share, sizeof share, "%5.0f%%", 100 * rate / cal.sgemm_flops);
      std::printf("%4zu %-10s %-22s %10.2f %9.1f %6s%s  %s\n", k, std::string(kernel_kind_name(K.kind)).c_str(), shape_str(K.space).c_str(),
                  times[k] * 1e6, rate / 1e9, share, pred.c_str(), ops.c_str());
    }
    if (hw) std::printf("all kernels: measured %.1f us, predicted %.1f us (%s): %.2fx\n", measured * 1e6, predicted * 1e6, hw->name.c_str(),
                        measured / predicted);
  }
}


// A GPU program's source, for a device that need not be here: the
// optimized graph, its schedule and the GPU emitter's program.
namespace {

void codegen_gpu(const CodegenOptions& a, const Model& m) {
  const CompileOptions co = compile_options(a.spec);
  Compilation c;
  run_stages(c, &m.graph, m.params, co, Stage::emit);
  const gpu::Target target = co.device->kind().target;
  const gpu::Program& p = c.gpu;
  namespace fs = std::filesystem;
  const std::string path = (fs::path(a.out) / ("kernels" + std::string(gpu::source_extension(target)))).string();
  std::ofstream f(path, std::ios::binary);
  if (!f || !(f << p.source) || (f.close(), !f)) throw Error("cannot write '" + path + "'");
  std::printf("wrote %s (%zu kernels as %zu launches, %s)\n", path.c_str(), c.schedule.kernels.size(), p.launches.size(),
              std::string(gpu::target_name(target)).c_str());
}

}  // namespace

void write_codegen(const CodegenOptions& a) {
  make_folder(a.out);
  Model m = make_model(a.spec);
  if (a.spec.device != "cpu") return codegen_gpu(a, m);
  Executable exe = tj::compile(m.graph, m.params, compile_options(a.spec));
  if (!exe.stats().compiled) throw Error("codegen: no C++ compiler found");
  namespace fs = std::filesystem;
  std::string path = (fs::path(a.out) / "kernels.cpp").string();
  std::ofstream f(path, std::ios::binary);
  if (!f || !(f << exe.source()) || (f.close(), !f)) throw Error("cannot write '" + path + "'");
  std::printf("wrote %s (%zu kernels, arena %lld bytes)\n", (fs::path(a.out) / "kernels.cpp").c_str(), exe.stats().kernels,
              (long long)exe.stats().arena_bytes);
}

}  // namespace tj::bench
