// tjc opt (this project's mlir-opt: passes on IR text, printed back) and
// tjc passes (per pass of the pipeline on a traced model: node counts, time,
// and, where the model fits, the outputs' difference from the graph before).
#pragma once

#include <string>

#include "bench/model.h"

namespace tj::bench {

struct OptOptions {
  std::string file, passes, weights = "f32";
  bool freeze = false, log = false;
  uint64_t seed = 0;
};

struct PassesOptions {
  ModelSpec spec;
  bool json = false, freeze = false;
  uint64_t seed = 0;
};

void run_opt(const OptOptions& a);
void passes_report(const PassesOptions& a);

}  // namespace tj::bench
