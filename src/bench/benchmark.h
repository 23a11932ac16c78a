// The benchmark of tjc bench: the interpreter and the compiled code side by
// side, in one process, on the same inputs, checked against each other;
// the first call as a user waits for it, in fresh processes (cold and warm
// cache); with `repeat` and `busy`, the per-call times of K fresh processes
// quiet and under a parallel build's load; the work against the machine's
// limit (FLOPs over the sgemm peak, or weight bytes over the stream
// bandwidth); and, on request, the weight formats, the autotuner and each
// kernel's time. And tjc codegen, which writes a model's generated source.
#pragma once

#include <string>

#include "bench/model.h"

namespace tj::bench {

struct BenchOptions {
  ModelSpec spec;
  std::string dump;          // write inputs, weights and compiled outputs as .npy files here
  bool json = false;         // the report as JSON
  bool profile = false;      // also time each kernel
  double budget = 2.0;       // seconds per measurement
  int busy = 0, repeat = 0;  // background compile jobs; fresh processes timed (K quiet, K busy)
  int steps = 32;            // spec.weights with the whole Llama: greedy tokens compared
  bool autotune = false;     // also the program tuned on this machine, against the rules'
  bool skip_interpreter = false;  // a model too large for the interpreter: outputs unchecked
};

// Prints the report (text, or JSON with `json`). Fresh processes run this
// executable as `bench --child` with spec_argv(spec).
void run_benchmark(const BenchOptions& o);

// What one fresh process measures (tjc bench --child, run by the parent):
// its first call end to end, from the process's start (trace, passes,
// fusion, planning, emission, compiler or cache, load, the call), then the
// per-call times for `budget` seconds. One line of JSON on standard output.
void bench_child(const BenchOptions& o);

struct CodegenOptions {
  ModelSpec spec;
  std::string out;  // folder
};
// Writes OUT/kernels.cpp (or the GPU program's source for spec.device).
void write_codegen(const CodegenOptions& o);

}  // namespace tj::bench
