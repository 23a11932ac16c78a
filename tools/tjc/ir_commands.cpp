// tjc trace, fmt and run: the IR in and out.
#include <cmath>
#include <cstdio>

#include "ir/text.h"
#include "ir/verifier.h"
#include "runtime/interpreter.h"
#include "runtime/random_inputs.h"
#include "tensorjit/error.h"
#include "tjc/common.h"

namespace tjc {

using namespace tj;

namespace {

struct RunArgs {
  std::string file, dtype = "f32";
  uint64_t seed = 0;
  std::vector<std::string> syms, sets;
};

void print_outputs(const std::vector<NDArray>& outs) {
  for (size_t i = 0; i < outs.size(); ++i) {
    const NDArray& a = outs[i];
    double sum = 0, l2 = 0;
    for (int64_t k = 0; k < a.numel(); ++k) {
      double v = a.get(k);
      sum += v;
      l2 += v * v;
    }
    std::printf("output %zu: %s sum=%.10g l2=%.10g\n", i, a.type_str().c_str(), sum, std::sqrt(l2));
  }
}

void cmd_run(const RunArgs& a) {
  Graph g = load_graph(a.file);
  verify(g);
  RandomInputOptions ro;
  ro.seed = a.seed;
  for (const auto& s : a.syms) {
    auto [k, v] = split_eq(s, "--sym");
    ro.sizes[k] = static_cast<int64_t>(parse_number(v, "--sym " + k));
  }
  for (const auto& s : a.sets) {
    auto [k, v] = split_eq(s, "--set");
    if (g.find(k) < 0) throw Error("--set: the graph has no input named '" + k + "'");
    ro.fixed[k] = parse_number(v, "--set " + k);
  }
  Bindings in = random_inputs(g, ro);
  auto t0 = Clock::now();
  auto outs = interpret(g, in, {dtype_arg(a.dtype)});
  double dt = seconds_since(t0);
  print_outputs(outs);
  std::fprintf(stderr, "interpreted %zu nodes in %.3f ms (%s)\n", g.size(), dt * 1e3, a.dtype.c_str());
}


}  // namespace

void add_trace_command(CLI::App& app) {
  auto a = std::make_shared<TraceArgs>();
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
  auto a = std::make_shared<RunArgs>();
  auto* c = app.add_subcommand("run", "interpret a graph on seeded random inputs");
  c->add_option("file", a->file, "IR file, or - for stdin")->required();
  c->add_option("--dtype", a->dtype, "compute dtype: f32 or f64")->check(CLI::IsMember({"f32", "f64"}));
  c->add_option("--seed", a->seed, "random seed");
  c->add_option("--sym", a->syms, "size of a symbolic dim, NAME=N (repeatable)");
  c->add_option("--set", a->sets, "value of a scalar input, NAME=V (repeatable)");
  c->callback([a] { cmd_run(*a); });
}

}  // namespace tjc
