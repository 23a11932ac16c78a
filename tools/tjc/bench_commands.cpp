// tjc bench: the interpreter and the compiled code side by side, in one
// process, on the same inputs; and tjc codegen, which dumps generated C++.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "cost/calibrate.h"
#include "models/llama.h"
#include "passes/pipeline.h"
#include "runtime/executable.h"
#include "runtime/npy.h"
#include "runtime/random_inputs.h"
#include "support/paths.h"
#include "tensorjit/error.h"
#include "tjc/common.h"

namespace tjc {

using namespace tj;

namespace {

// Median seconds per call: at least `min_runs`, and until `budget` seconds.
template <class F>
double median_seconds(F f, int min_runs, double budget) {
  std::vector<double> t;
  auto start = Clock::now();
  while (static_cast<int>(t.size()) < min_runs || (seconds_since(start) < budget && t.size() < 10000)) {
    auto t0 = Clock::now();
    f();
    t.push_back(seconds_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Model {
  Graph graph;
  Bindings params, inputs;
};

// Seeded weights with real RoPE tables; inputs for `mode`.
Model make_model(const TraceArgs& a) {
  Model m;
  m.graph = trace_model(a);
  RandomInputOptions ro;
  ro.seed = 7;
  if (m.graph.find("pos") >= 0) ro.fixed["pos"] = 0;
  Bindings all = random_inputs(m.graph, ro);
  if (a.ir.empty() && a.model != "branches") {
    const auto& c = models::llama_config(a.config);
    DType dt = dtype_arg(a.dtype);
    if (all.count("rope_cos")) {
      all["rope_cos"] = models::rope_table_array(c, false, dt);
      all["rope_sin"] = models::rope_table_array(c, true, dt);
    }
    // Decode at the cache's last row, prefill at 0.
    if (all.count("pos") && a.mode == "decode") {
      for (const auto& [name, arr] : all)
        if (name.rfind("k_cache", 0) == 0) all["pos"] = NDArray::scalar(DType::i64, static_cast<double>(arr.shape()[2] - 1));
    }
  }
  for (auto& [k, v] : all) (m.graph.node(m.graph.find(k)).op == Op::param ? m.params : m.inputs)[k] = std::move(v);
  return m;
}

struct BenchArgs {
  TraceArgs trace;
  std::string dump;
  bool json = false, profile = false;
  double budget = 2.0;
};

void cmd_bench(const BenchArgs& a) {
  Model m = make_model(a.trace);
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
  Executable exe, warm;
  try {
    exe = Executable::compile(m.graph, m.params);
    warm = Executable::compile(m.graph, m.params);
  } catch (...) {
    restore();
    throw;
  }
  restore();
  if (!exe.stats().compiled) throw Error("bench: no C++ compiler, nothing to compare");

  // Correctness first, on identical inputs (the compiled run updates caches in place).
  Bindings run_inputs = m.inputs;
  std::vector<NDArray> got;
  exe.run(run_inputs, got);
  if (!a.dump.empty()) {
    for (const auto& [k, v] : all) write_npy((fs::path(a.dump) / (k + ".npy")).string(), v);
    for (size_t i = 0; i < got.size(); ++i) write_npy((fs::path(a.dump) / ("output" + std::to_string(i) + ".npy")).string(), got[i]);
  }
  Difference d = compare_outputs(got, interpret(m.graph, all, {DType::f32}));

  double t_interp = median_seconds([&] { interpret(m.graph, all, {DType::f32}); }, 3, a.budget);
  // As a decode loop runs it: the donated caches are updated in place and
  // not copied out again; and, for reference, with that copy.
  RunOptions in_place;
  in_place.copy_donated_outputs = false;
  double t_comp = median_seconds([&] { exe.run(run_inputs, got, in_place); }, 10, a.budget);
  double t_copy = median_seconds([&] { exe.run(run_inputs, got); }, 10, a.budget / 2);

  // Work and limits.
  Schedule s = fuse(exe.optimized());
  int64_t flops = 0, bytes = 0, weight_bytes = 0;
  for (const Kernel& k : s.kernels) flops += k.flops, bytes += k.bytes_read + k.bytes_written;
  for (const auto& [k, v] : m.params)
    if (k.rfind("rope_", 0) != 0) weight_bytes += static_cast<int64_t>(v.nbytes());
  Calibration cal;
  if (!load_calibration(&cal)) {
    cal = measure_machine();
    save_calibration(cal);
  }
  bool decode = a.trace.mode == "decode";
  double limit_s = decode ? static_cast<double>(weight_bytes) / cal.stream_bandwidth : static_cast<double>(flops) / cal.sgemm_flops;
  double fraction = limit_s / t_comp;

  if (a.json) {
    nlohmann::json j = {{"model", a.trace.model},
                        {"config", a.trace.config},
                        {"mode", a.trace.mode},
                        {"interpreter_us", t_interp * 1e6},
                        {"compiled_us", t_comp * 1e6},
                        {"compiled_copying_caches_us", t_copy * 1e6},
                        {"speedup", t_interp / t_comp},
                        {"gflops", static_cast<double>(flops) / t_comp / 1e9},
                        {"gbps", static_cast<double>(bytes) / t_comp / 1e9},
                        {"limit", decode ? "weight bytes / stream bandwidth" : "FLOPs / sgemm peak"},
                        {"limit_us", limit_s * 1e6},
                        {"limit_fraction", fraction},
                        {"cold_compile_s", exe.stats().compile_seconds},
                        {"warm_load_s", warm.stats().load_seconds},
                        {"warm_cache_hit", warm.stats().cache_hit},
                        {"kernels", exe.stats().kernels},
                        {"max_rel_diff", d.max_rel},
                        {"sgemm_gflops", cal.sgemm_flops / 1e9},
                        {"stream_gbps", cal.stream_bandwidth / 1e9}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("%s %s %s (f32), %zu kernels; compiled vs interpreter max rel diff %.2e\n", a.trace.model.c_str(),
              a.trace.config.c_str(), a.trace.mode.c_str(), exe.stats().kernels, d.max_rel);
  std::printf("interpreter %12.1f us\ncompiled    %12.1f us   %.1fx faster", t_interp * 1e6, t_comp * 1e6, t_interp / t_comp);
  std::printf(t_copy > t_comp * 1.02 || t_copy < t_comp * 0.98 ? "   (%.1f us copying the updated caches out too)\n" : "\n", t_copy * 1e6);
  std::printf("compiled: %.2f GFLOP/s, %.2f GB/s; limit (%s) %.1f us: %.0f%% of it\n", flops / t_comp / 1e9, bytes / t_comp / 1e9,
              decode ? "weight bytes / stream bandwidth" : "FLOPs / sgemm peak", limit_s * 1e6, fraction * 100);
  std::printf("cold compile %.2f s, warm load %.1f ms (cache hit: %s)\n", exe.stats().compile_seconds,
              warm.stats().load_seconds * 1e3, warm.stats().cache_hit ? "yes" : "no");
  if (a.profile) {
    auto times = exe.profile(run_inputs, 50);
    const Graph& og = exe.optimized();
    std::printf("\n%4s %-10s %-22s %10s  %s\n", "#", "kind", "space", "median us", "ops");
    for (size_t k = 0; k < times.size(); ++k) {
      const Kernel& K = exe.schedule().kernels[k];
      std::string ops;
      for (ValueId v : K.ops) ops += std::string(ops.empty() ? "" : " ") + og.node(v).def().name;
      std::printf("%4zu %-10s %-22s %10.2f  %s\n", k, std::string(kernel_kind_name(K.kind)).c_str(), shape_str(K.space).c_str(),
                  times[k] * 1e6, ops.c_str());
    }
  }
}

struct CodegenArgs {
  TraceArgs trace;
  std::string out;
};

void cmd_codegen(const CodegenArgs& a) {
  make_folder(a.out);
  Model m = make_model(a.trace);
  Executable exe = Executable::compile(m.graph, m.params);
  if (!exe.stats().compiled) throw Error("codegen: no C++ compiler found");
  namespace fs = std::filesystem;
  std::string path = (fs::path(a.out) / "kernels.cpp").string();
  std::ofstream f(path, std::ios::binary);
  if (!f || !(f << exe.source()) || (f.close(), !f)) throw Error("cannot write '" + path + "'");
  std::printf("wrote %s (%zu kernels, arena %lld bytes)\n", (fs::path(a.out) / "kernels.cpp").c_str(), exe.stats().kernels,
              (long long)exe.stats().arena_bytes);
}

}  // namespace

void add_bench_commands(CLI::App& app) {
  auto ba = std::make_shared<BenchArgs>();
  auto* b = app.add_subcommand("bench", "time the interpreter and the compiled code side by side");
  add_trace_options(b, ba->trace);
  b->add_flag("--json", ba->json, "JSON output");
  b->add_option("--seconds", ba->budget, "time budget per measurement, 0.001 to 3600")->check(finite_range(0.001, 3600));
  b->add_flag("--profile", ba->profile, "also time each kernel");
  b->add_option("--dump", ba->dump, "write inputs, weights and compiled outputs as .npy files to this folder");
  b->callback([ba] { cmd_bench(*ba); });

  auto ca = std::make_shared<CodegenArgs>();
  auto* c = app.add_subcommand("codegen", "write the generated C++ for a model");
  add_trace_options(c, ca->trace);
  c->add_option("-o,--out", ca->out, "output folder")->required();
  c->callback([ca] { cmd_codegen(*ca); });
}

}  // namespace tjc
