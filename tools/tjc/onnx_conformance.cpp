// tjc onnx-conformance: its options (src/bench/onnx_conformance.h).
#include <memory>

#include "bench/onnx_conformance.h"
#include "tjc/common.h"

namespace tjc {

using namespace tj;

void add_onnx_commands(CLI::App& app) {
  auto a = std::make_shared<ConformanceOptions>();
  auto* c = app.add_subcommand("onnx-conformance", "run the ONNX backend node test cases (scripts/onnx-testdata writes them)");
  c->add_option("--dir", a->dir, "the cases' folder (default build/onnx-node)");
  c->add_option("--filter", a->filter, "only cases whose name or op matches this regular expression");
  c->add_option("--json", a->json_out, "write every case's outcome to this file");
  c->add_option("--markdown", a->markdown, "write the per-op table to this file");
  c->add_option("--jobs", a->jobs, "cases run at once")->check(CLI::Range(1, 64));
  c->add_option("--timeout", a->timeout, "seconds a case may take")->check(finite_range(1, 3600));
  c->add_option("--require", a->require, "a file of case names (one per line) that must pass: exit 1 if one does not");
  c->add_flag("--interpret", a->interpret_only, "the interpreter only (no compilation)");
  c->add_flag("-v,--verbose", a->verbose, "print every case's outcome");
  c->callback([a] { run_onnx_conformance(*a); });
}

}  // namespace tjc
