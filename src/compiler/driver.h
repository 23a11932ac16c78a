// The compiler driver: the one list of stages from a traced graph to a
// loaded library of kernels, each timed. Executable::compile runs them all
// and lays the result out in memory; the analysis stops after scheduling.
//
//   stage                 does                                               skipped
//   compiler probe        find a working C++ compiler (once per process)
//   program cache lookup  the optimized graph and constants of an earlier   without a compiler; control flow
//                         compilation (compiler/program_cache.h)
//   passes                the pass pipeline, params frozen                   on a program cache hit
//   program cache store   the optimized graph and constants, for next time   on a hit; when not cacheable
//   fusion                the graph's kernels (schedule/fusion.h)
//   reorder               kernel order for a lower peak (memory/lifetimes.h) options.reorder false
//   emit                  C++ per kernel (codegen/cpp)
//   build, load           compile, or the kernel cache, then dlopen
//
// Each stage appends (name, seconds) to Compilation::stages; TJ_LOG=compile
// prints the list (Executable::compile, with its own "layout" stage).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "codegen/cpp/build.h"
#include "codegen/cpp/emit.h"
#include "compiler/options.h"

namespace tj {

struct Compilation {
  std::optional<Compiler> cxx;  // none: no working C++ compiler (the interpreter runs the graph)
  Graph graph;                  // optimized
  bool program_cache_hit = false;
  std::string key;              // the program cache's key ("" when not cacheable)
  std::shared_ptr<const void> prepared;                              // the program cache's constants, if any
  std::unordered_map<std::string, const void*> prepared_constants;  // by their tj.const.N param's name
  SymEnv hint;                  // the sizes choices are made at
  Schedule schedule;
  EmittedProgram program;
  BuildResult built;
  std::vector<std::pair<std::string, double>> stages;

  // Ends the current stage: the time since the previous one is `name`'s.
  void stage(std::string name);
  void stage(std::string name, double seconds);  // a stage timed by its own code

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// Compiler probe, program cache lookup, passes, program cache store. Params
// must have been checked against the graph. Leaves c.graph optimized.
void optimize(Compilation& c, const Graph& traced, const Bindings& params, const CompileOptions& o);
// The program stored under `key` (compiler probe, program cache hit), for a
// caller that knows the key without the traced graph's params (an ONNX
// model file seen before): false when there is no compiler or no such entry.
bool load_prepared(Compilation& c, const std::string& key);
// Fusion and (with `reorder`) reordering, counted and decided at `hint`.
Schedule schedule_kernels(const Graph& g, const FusionOptions& fusion, bool reorder, const SymEnv& hint);
// o.device, else $TJ_DEVICE (checked), else the CPU.
Device requested_device(const CompileOptions& o);
// Fusion (with o's donations) and reordering of c.graph, decided at its
// size hint: c.hint and c.schedule.
void schedule_program(Compilation& c, const CompileOptions& o);
// Fusion, reordering, emission, build and load of c.graph, which must have
// no control flow; c.cxx must be set.
void generate(Compilation& c, const CompileOptions& o);

}  // namespace tj
