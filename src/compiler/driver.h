// The compiler driver: run_stages() is the one list of stages from a traced
// graph to a loaded, tuned program, each with the condition under which it
// is skipped. compile() (compiler/compile.h) runs all of them; the analysis
// variants and `tjc codegen` run them up to a stage. Each stage that runs
// is timed into Compilation::stages, each that does not says why there;
// TJ_LOG=compile prints that record.
//
//   stage                 does                                               skipped
//   compiler probe        find a working C++ compiler (once per process)     when no code is generated
//   program cache lookup  the optimized graph and constants of an earlier   no compiler; off; control flow;
//                         compilation (compiler/program_cache.h)             this build's identity unknown
//   passes                the pass pipeline, params frozen                   on a program cache hit
//   program cache store   the optimized graph and constants, for next time   on a hit; when not cacheable
//   fusion                the graph's kernels (schedule/fusion.h)            control flow (the host program
//   reorder               kernel order for a lower peak (memory/lifetimes.h) compiles its parts); no compiler
//   emit                  C++ per kernel (codegen/cpp), or GPU C             (the interpreter runs the graph);
//   build                 compile, or the kernel cache; on a device, the     reorder: options.reorder false
//                         DeviceProgram (weights uploaded)
//   load                  dlopen                                             on a device
//   layout                weights and activations placed (Executable::load)  on a device
//   autotune              each tunable kernel's candidate (tune/autotune.h)  no tunable kernels
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "codegen/cpp/build.h"
#include "codegen/cpp/emit.h"
#include "codegen/gpu/emit.h"
#include "compiler/options.h"
#include "runtime/executable.h"

namespace tj {

enum class Stage { probe, cache_lookup, passes, cache_store, fusion, reorder, emit, build, load, layout, autotune };

// How the compiled graph runs, once the passes have run.
enum class Form {
  kernels,      // generated code: on this CPU, or on a device
  host,         // a graph with control flow: the host runs it over compiled parts
  interpreter,  // no C++ compiler: the interpreter runs the optimized graph
};

struct StageRecord {
  std::string name;
  double seconds = 0;
  std::string skipped;  // why it did not run ("" when it ran)
};

struct Compilation {
  std::optional<Compiler> cxx;  // none: no working C++ compiler
  Device device;  // the CPU unless a device is asked for
  Form form = Form::kernels;
  Graph graph;                  // optimized
  bool program_cache_hit = false;
  std::string key;              // the program cache's key ("" when not cacheable)
  std::shared_ptr<const void> prepared;                              // the program cache's constants, if any
  std::unordered_map<std::string, const void*> prepared_constants;  // by their tj.const.N param's name
  SymEnv hint;                  // the sizes choices are made at
  Schedule schedule;
  EmittedProgram program;       // on this CPU
  gpu::Program gpu;             // on a device
  BuildResult built;
  std::optional<Executable> exe;  // from the build (device) or layout (CPU) stage on
  std::vector<StageRecord> stages;  // in the list's order, run or skipped
};

// Every stage up to `last` (Stage::autotune: all of them) of `traced`
// with `params` (every param of it; checked by compile()). With `traced`
// null, the program comes from the program cache under c.key (no passes);
// false when there is no compiler or no such entry.
bool run_stages(Compilation& c, const Graph* traced, const Bindings& params, const CompileOptions& o, Stage last = Stage::autotune);
// "compiler probe 0.1 ms, program cache hit 3.2 ms, passes skipped (program cache hit), ...".
std::string stages_text(const Compilation& c);
// The stages that ran, with their seconds (CompileStats::stage_seconds).
std::vector<std::pair<std::string, double>> stage_seconds(const Compilation& c);

// o.device, else $TJ_DEVICE (checked), else the CPU.
Device requested_device(const CompileOptions& o);

}  // namespace tj
