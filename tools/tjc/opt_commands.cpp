// tjc opt and tjc passes: their options (src/bench/pass_reports.h).
#include <memory>

#include "bench/pass_reports.h"
#include "tjc/common.h"

namespace tjc {

using namespace tj;

void add_opt_commands(CLI::App& app) {
  auto oa = std::make_shared<OptOptions>();
  auto* opt = app.add_subcommand("opt", "run passes on IR text and print the result");
  opt->add_option("file", oa->file, "IR file, or - for stdin")->required();
  opt->add_option("--passes", oa->passes, "comma-separated passes to run in order (default: the default pipeline)");
  opt->add_flag("--freeze", oa->freeze, "params become constants (seeded random values: IR text has no weights)");
  opt->add_option("--seed", oa->seed, "seed for frozen values")->check(seed_check());
  add_weights_option(opt, oa->weights);
  opt->add_flag("--log", oa->log, "print the IR after each pass that changed it, and pass times (as TJ_LOG=passes)");
  opt->callback([oa] { run_opt(*oa); });

  auto pa = std::make_shared<PassesOptions>();
  auto* passes = app.add_subcommand("passes", "report node counts and numerical differences after each pass");
  add_trace_options(passes, pa->spec);
  passes->add_flag("--json", pa->json, "JSON output");
  passes->add_flag("--freeze", pa->freeze, "freeze params (seeded random values) before the pipeline");
  passes->add_option("--seed", pa->seed, "seed for inputs and weights")->check(seed_check());
  add_weights_option(passes, pa->spec.weights);
  passes->callback([pa] { passes_report(*pa); });
}

}  // namespace tjc
