// tjc bench --autotune: the program with its kernels' schedules tuned on
// this machine against the rules' schedules, timed side by side in one
// process; and a second compilation, which must take every choice from the
// tuning cache without measuring.
#pragma once

#include <nlohmann/json.hpp>

#include "compiler/options.h"
#include "ir/graph.h"

namespace tj::bench {

nlohmann::json autotune_report(const Graph& graph, const Bindings& params, const Bindings& inputs, const CompileOptions& o,
                               double budget, int rounds = 10);
void print_autotune_report(const nlohmann::json& report);

}  // namespace tj::bench
