// A compiled graph, run from a static plan: one arena sized by the memory
// plan, constants and frozen weights held in place, a flat list of kernel
// functions whose buffer addresses are all fixed at build time. A call binds
// the inputs, runs the list and copies the outputs out: no allocation, no
// graph walk, no lookups (the CPU analog of CUDA Graph replay).
//
//   tj::Executable exe = tj::compile(graph, weights);  // compiler/compile.h
//   exe.run(inputs, outputs);
//
// KV caches updated by kv_write are donated: the cache input arrays are
// written in place, and the updated caches are also returned as outputs
// unless the call says to leave those out (a decode loop that keeps reading
// its caches from its inputs saves copying them every step).
// The compiler makes an Executable of what it built (compiler/compile.h);
// this file binds buffers and runs.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/cpp/build.h"
#include "codegen/cpp/emit.h"
#include "codegen/gpu/emit.h"
#include "reference/interpreter.h"
#include "schedule/fusion.h"

namespace tj {

class Executable;
class ThreadPool;
namespace device {
struct Kind;
}

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
  std::string compiler_said;  // the C++ compiler's warnings when it built the kernels (a cache miss)
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

// What the tuner needs of a loaded program (tune/autotune.h).
struct TuningTarget {
  const std::vector<EmittedProgram::Tunable>* tunable = nullptr;
  std::vector<void (*)(void**)>* kernels = nullptr;  // in schedule order; each tunable kernel's choice is set here
  std::function<void (*(const std::string&))(void**)> resolve;  // a symbol of the library
  // Runs the program once on seeded inputs and returns the table the
  // kernels then read (their operands in place); throws if it cannot.
  std::function<void**()> prepare;
};

// A compiled part of a graph with control flow (host_program.h): a run of
// plain ops (`region` false) or a region of a while_loop or cond.
using CompilePart = std::function<Executable(const Graph& part, bool region)>;

class Executable {
 public:
  // The forms a compilation takes (compiler/compile.cpp makes them); each
  // sets stats().compiled and kernels, and keeps the rest of `stats`.
  //
  // The optimized graph, scheduled, with the program cache's constants.
  struct Parts {
    Graph graph;
    Schedule schedule;
    std::shared_ptr<const void> prepared;                              // the program cache's constants, read in place
    std::unordered_map<std::string, const void*> prepared_constants;  // by their tj.const.N param's name
  };
  // Generated C++, built and loaded: laid out here (weights held, the table
  // of addresses, buffers at the sizes when they are known). `pool`: the
  // threads the kernels split their work over.
  static Executable load(Parts parts, EmittedProgram program, const BuildResult& built, const Bindings& params,
                         const ThreadPool& pool, CompileStats stats);
  // Kernels for a device of the registry (runtime/device/backend.h: a GPU,
  // an OpenCL device), rendered for kind.target by codegen/gpu, run by a
  // DeviceProgram.
  static Executable load_on_device(const device::Kind& kind, Parts parts, gpu::Program program, const Bindings& params, CompileStats stats);
  // A graph with control flow, run by a HostProgram over parts that
  // `compile_part` compiles.
  static Executable on_host(Graph graph, const CompilePart& compile_part, CompileStats stats);
  // No C++ compiler: the interpreter runs the graph, in f64 when any value is.
  static Executable interpreted(Graph graph, const Bindings& params, CompileStats stats);

  // The candidates of a loaded program's tunable kernels, and a run on
  // seeded inputs at `hint`'s sizes (the target keeps those inputs alive).
  TuningTarget tuning_target(const SymEnv& hint);
  void set_stats(CompileStats stats);

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
  explicit Executable(std::shared_ptr<State> s) : s_(std::move(s)) {}
  std::shared_ptr<State> s_;
};

}  // namespace tj
