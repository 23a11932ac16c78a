// tjc grad: its options (src/bench/grad_report.h).
#include <memory>

#include "bench/grad_report.h"
#include "tjc/common.h"

namespace tjc {

using namespace tj;

void add_grad_command(CLI::App& app) {
  auto a = std::make_shared<GradOptions>();
  auto* c = app.add_subcommand("grad", "the backward of a model's first output: forward and backward as partitioned (--report: what is saved)");
  add_trace_options(c, a->spec);
  c->add_option("--wrt", a->wrt, "differentiate with respect to these inputs or params (default: the float params but RoPE tables)");
  c->add_flag("--report", a->report, "what the forward saves, per kernel, against saving every forward value");
  c->add_flag("--json", a->json, "the report as JSON");
  c->callback([a] { grad_report(*a); });
}

}  // namespace tjc
