// tjc bench --autotune: the program with its kernels' schedules tuned on
// this machine against the rules' schedules, timed side by side in one
// process; and a second compilation, which must take every choice from the
// tuning cache without measuring.
#pragma once

#include <nlohmann/json.hpp>

#include "compiler/options.h"
#include "ir/graph.h"

namespace tjc {

nlohmann::json autotune_report(const tj::Graph& graph, const tj::Bindings& params, const tj::Bindings& inputs, const tj::CompileOptions& o,
                               double budget, int rounds = 10);
void print_autotune_report(const nlohmann::json& report);

}  // namespace tjc
