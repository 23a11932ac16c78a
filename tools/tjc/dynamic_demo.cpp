// tjc dynamic-demo and tjc explain: their options (src/bench/dynamic_demo.h).
#include <memory>

#include "bench/dynamic_demo.h"
#include "tjc/common.h"

namespace tjc {

using namespace tj;

void add_dynamic_demo_command(CLI::App& app) {
  auto a = std::make_shared<DynamicDemoOptions>();
  auto* c = app.add_subcommand("dynamic-demo", "the JIT on changing shapes and data-dependent loops: policies, graph breaks, guard cost");
  c->add_flag("--json", a->json, "JSON output");
  c->add_option("--steps", a->steps, "decode steps (default 512)");
  c->add_option("--first-kv", a->first, "KV length of the first step (default 101)");
  c->callback([a] { run_dynamic_demo(*a); });
  auto e = std::make_shared<DynamicDemoOptions>();
  e->steps = 3;
  auto* x = app.add_subcommand("explain", "the dynamic demo's jitted functions: entries, guards, recompilations, graph breaks");
  x->add_option("--steps", e->steps, "decode steps (default 3)");
  x->add_option("--first-kv", e->first, "KV length of the first step (default 101)");
  x->callback([e] { explain_dynamic_demo(*e); });
}

}  // namespace tjc
