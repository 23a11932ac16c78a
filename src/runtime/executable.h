// A compiled graph, run from a static plan: one arena sized by the memory
// plan, constants and frozen weights held in place, a flat list of kernel
// functions whose buffer addresses are all fixed at build time. A call binds
// the inputs, runs the list and copies the outputs out: no allocation, no
// graph walk, no lookups (the CPU analog of CUDA Graph replay).
//
//   tj::Executable exe = tj::Executable::compile(graph, weights);
//   exe.run(inputs, outputs);
//
// KV caches updated by kv_write are donated: the cache input arrays are
// written in place, and the updated caches are also returned as outputs
// unless the call says to leave those out (a decode loop that keeps reading
// its caches from its inputs saves copying them every step).
// Without a C++ compiler, compile() warns once and runs the optimized graph
// on the interpreter instead.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/options.h"
#include "reference/interpreter.h"
#include "schedule/fusion.h"

namespace tj {

struct Compilation;  // compiler/driver.h

struct RunOptions {
  bool copy_donated_outputs = true;  // false: outputs that are donated caches are left as they are (none at first)
  // A decode-sized program's small kernels: -1 split over the pool or not,
  // whichever its calls measure faster (runtime/split_choice.h); 0 on the
  // calling thread; 1 split. The results are the same bits.
  int split_small_kernels = -1;
};

struct CompileStats {
  bool compiled = false;     // false: interpreter fallback
  bool cache_hit = false;          // the kernel library came from the cache
  bool program_cache_hit = false;  // the optimized program and its constants did
  std::string program_key;         // its key in the program cache ("" when not cacheable)
  double compile_seconds = 0, load_seconds = 0;
  size_t kernels = 0;
  int64_t arena_bytes = 0, temporary_bytes = 0, scratch_bytes = 0, constant_bytes = 0;
  std::string source_path;
  // Seconds per stage of compile(), in order: compiler probe (once per
  // process), program cache lookup or hit, passes and program cache store
  // (on a miss), fusion, reorder, emit, build (compiler, or the kernel cache
  // lookup), load, layout (weights and activations placed). TJ_LOG=compile
  // prints them.
  std::vector<std::pair<std::string, double>> stage_seconds;
  // Autotuning (CompileOptions::autotune): kernels with candidate
  // schedules, those whose choice came from the tuning cache and those
  // measured now (in tuning_seconds); per tunable kernel "k8: rows 32,
  // partials (rule: rows 16, partials)", the rule's named where it lost.
  int tunable_kernels = 0, tuned_from_cache = 0, tuned_now = 0;
  double tuning_seconds = 0;
  std::vector<std::string> tuning_choices;
};

class Executable {
 public:
  // `params`: every param of `graph` (they are frozen into the compilation).
  static Executable compile(const Graph& graph, const Bindings& params, const CompileOptions& o = {});
  // The program the program cache holds under `program_key` (a compilation's
  // stats().program_key), without the traced graph or its weights: nothing
  // when there is no compiler, no such entry, or the program still reads a
  // weight that is not one of its prepared constants.
  static std::optional<Executable> compile_prepared(const std::string& program_key, const CompileOptions& o = {});

  // `outputs` is resized to the graph's outputs on first use and reused.
  // Inputs are not const: caches written by kv_write are donated.
  void run(Bindings& inputs, std::vector<NDArray>& outputs, const RunOptions& o = {});
  std::vector<NDArray> run(Bindings& inputs);

  // Median seconds of each kernel over `reps` runs (for tjc bench --profile).
  std::vector<double> profile(Bindings& inputs, int reps);
  const Schedule& schedule() const;

  const CompileStats& stats() const;
  std::string device() const;  // "cpu", or the device it runs on ("CUDA: NVIDIA H200 (sm_90)")
  const std::string& source() const;   // the generated C++
  // Per output: the index, in optimized().inputs(), of the input whose
  // array holds it after a run (a donated cache, updated in place), or -1.
  const std::vector<int>& output_aliases() const;
  const Graph& optimized() const;      // the graph the kernels compute
  // Copies of what optimized()'s params are bound to (its frozen weights,
  // the program cache's constants): interpret(optimized(), inputs and these)
  // is what the kernels compute.
  Bindings held_params() const;

  struct State;

 private:
  static Executable finish(Compilation& c, const Bindings& params, const CompileOptions& o);
  // The rest of finish() for a device: `s` has what finish() set from `c`.
  static Executable finish_on_device(std::shared_ptr<State> s, Compilation& c, const Bindings& params, const CompileOptions& o, Device dev);
  // Each tunable kernel's candidate: recorded, or measured now (autotune.h).
  void tune(const SymEnv& hint);
  std::shared_ptr<State> s_;
};

}  // namespace tj
