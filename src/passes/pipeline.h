// The pass pipeline: the registry of passes, the default order, and a runner
// that verifies after every pass, logs (TJ_LOG=passes) the IR after each pass
// that changed it with the time each took, and optionally checks each step
// against the unoptimized graph on the interpreter (differential check).
#pragma once

#include <string>
#include <vector>

#include "passes/passes.h"

namespace tj {

using PassFn = bool (*)(Graph&, const PassOptions&);

struct PassInfo {
  const char* name;
  PassFn run;
  const char* why;
};

const std::vector<PassInfo>& pass_registry();
const PassInfo& find_pass(const std::string& name);  // throws tj::Error listing the known passes

// The default pipeline, in order. `freeze` adds the freeze step first.
std::vector<std::string> default_pipeline(bool freeze);

struct PipelineOptions {
  PassOptions pass;
  bool verify = true;        // run the verifier after every pass
  bool differential = false; // interpret before/after and record the difference
  DType differential_dtype = DType::f64;  // compute dtype of that check
  uint64_t seed = 0;         // inputs for the differential check
  const Bindings* inputs = nullptr;  // or these, instead of seeded random ones
  SymEnv sizes;              // sizes of symbolic dims for the differential check
  std::map<std::string, double, std::less<>> fixed_inputs;  // e.g. pos
  bool log = false;          // also log without TJ_LOG=passes
  // End with `lower` when the graph has ops without kernels (Fuse::lower), so
  // that what comes out can be fused; off to see a pipeline's own output.
  bool lower = true;
};

// Node counts by category, and by op for the special ones.
struct NodeCounts {
  int64_t matmul = 0, elementwise = 0, reduction = 0, view = 0, movement = 0, constant = 0, composite = 0,
          special = 0, flash_attn = 0, total_ops = 0;
};
NodeCounts count_nodes(const Graph& g);

struct PassRecord {
  std::string pass;
  bool changed = false;
  double seconds = 0;
  NodeCounts counts;
  double max_abs_diff = -1, max_rel_diff = -1;  // -1: not checked
  bool bit_identical = false;
};

// Runs `passes` in order on `g`. Throws tj::Error naming the pass if the
// verifier fails after it.
std::vector<PassRecord> run_pipeline(Graph& g, const std::vector<std::string>& passes, const PipelineOptions& o);

// max |a-b| and max |a-b| / max|b| over all outputs; bit_identical when every
// element has the same bits.
struct Difference {
  double max_abs = 0, max_rel = 0;
  bool bit_identical = true;
};
Difference compare_outputs(const std::vector<NDArray>& got, const std::vector<NDArray>& want);

}  // namespace tj
