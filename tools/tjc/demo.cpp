// tjc demo: the main job (src/bench/demo.h).
#include "bench/demo.h"
#include "tjc/common.h"

namespace tjc {

void add_demo_command(CLI::App& app) {
  app.add_subcommand("demo", "the main job: trace, optimize and compile the tiny Llama; prefill and decode, checked against the interpreter")
      ->callback(tj::bench::run_demo);
}

}  // namespace tjc
