// What a compilation is asked for: the options of the compiler driver
// (compiler/driver.h), which Executable::compile and everything that
// compiles pass down.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/interpreter.h"
#include "schedule/fusion.h"

namespace tj {

class ThreadPool;

struct CompileOptions {
  FusionOptions fusion;
  bool reorder = true;               // reorder kernels to lower peak memory
  std::vector<std::string> passes;   // empty: the default pipeline (params frozen)
  // The format of the products' frozen weights: f32, bf16, or i8 with a
  // scale per output channel (passes/quantize_weights.cpp).
  DType weights = DType::f32;
  // Typical values of the graph's size symbols (for choices such as running
  // a kernel in parallel); a symbol not given counts as 64.
  SymEnv size_hint;
  // Look the optimized program up in the program cache, and store it there
  // (compiler/program_cache.h): a warm start skips the passes.
  bool program_cache = true;
  // Outputs to write into inputs' arrays, which each call gives up (fusion.h:
  // Donation; Executable::output_aliases() says which were honored).
  std::vector<Donation> donate;
  // Time the candidate schedules of matrix-vector products and attentions
  // on this machine and keep the winners (runtime/autotune.h); also on
  // with TJ_AUTOTUNE=1 when not set here (false here: off whatever the
  // environment says). A later compilation takes them from the cache.
  std::optional<bool> autotune;
  // The threads the generated code runs on; null: ThreadPool::global().
  ThreadPool* pool = nullptr;
};

}  // namespace tj
