// tjc trace, fmt and run: the IR in and out (run: src/bench/run_graph.h).
#include <cstdio>
#include <memory>

#include "bench/run_graph.h"
#include "ir/text.h"
#include "tjc/common.h"

namespace tjc {

using namespace tj;

void add_trace_command(CLI::App& app) {
  auto a = std::make_shared<ModelSpec>();
  auto* c = app.add_subcommand("trace", "trace a model and print its graph");
  add_trace_options(c, *a);
  c->callback([a] {
    auto t0 = Clock::now();
    Graph g = trace_model(*a);
    double dt = seconds_since(t0);
    std::string text = print_graph(g);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fprintf(stderr, "traced %zu nodes in %.2f ms\n", g.size(), dt * 1e3);
  });
}

void add_fmt_command(CLI::App& app) {
  auto file = std::make_shared<std::string>();
  auto* c = app.add_subcommand("fmt", "parse IR text and print it back");
  c->add_option("file", *file, "IR file, or - for stdin")->required();
  c->callback([file] {
    std::string text = print_graph(load_graph(*file));
    std::fwrite(text.data(), 1, text.size(), stdout);
  });
}

void add_run_command(CLI::App& app) {
  auto a = std::make_shared<GraphRunOptions>();
  auto* c = app.add_subcommand("run", "interpret (or compile and run) a graph on seeded random or given inputs");
  c->add_option("file", a->file, "IR file, .onnx model, or - for stdin")->required();
  c->add_option("--dtype", a->dtype, "compute dtype: f32 or f64")->check(CLI::IsMember({"f32", "f64"}));
  c->add_option("--seed", a->seed, "random seed")->check(seed_check());
  c->add_option("--sym", a->syms, "size of a symbolic dim, NAME=N (repeatable)");
  c->add_option("--set", a->sets, "value of a scalar input (every element of a larger one), NAME=V (repeatable)");
  c->add_option("--input", a->inputs, "an input's values: NAME=FILE.npy or NAME=v1,v2,... (repeatable)");
  c->add_option("--weights", a->weights, "a safetensors file: its tensors named like inputs or params bind them (repeatable)");
  c->add_option("--weight-format", a->weight_format, "compiled: the matrix products' weights stored as f32, bf16 or int8 (per output channel)")
      ->check(CLI::IsMember({"f32", "bf16", "int8"}));
  c->add_flag("--compiled", a->compiled, "run the generated code instead of the interpreter (the default for .onnx models)");
  add_device_option(c, a->device);
  c->add_flag("--interpret", a->interpret, "run the interpreter (the default for IR files)");
  c->add_flag("--check", a->check, "run the interpreter and the generated code on the same inputs and compare (exit 1 if they differ)");
  c->add_option("--tol", a->tol, "--check: relative tolerance of float outputs (default: 1e-4 f32, 1e-9 f64, 1e-2 f16/bf16)")
      ->check(finite_range(0, 1));
  c->add_option("--output", a->output, "write the outputs as DIR/NAME.npy (an ONNX model's output names; output0, output1, ... for IR), creating DIR");
  c->callback([a] { run_graph(*a); });
}

}  // namespace tjc
