// tjc bench and tjc codegen: their options; the benchmark is the bench
// library's (src/bench/benchmark.h).
#include <memory>

#include "bench/benchmark.h"
#include "tjc/common.h"

namespace tjc {

void add_bench_commands(CLI::App& app) {
  auto ba = std::make_shared<BenchOptions>();
  auto child = std::make_shared<bool>(false);
  auto* b = app.add_subcommand("bench", "time the interpreter and the compiled code side by side");
  add_trace_options(b, ba->spec);
  add_size_options(b, ba->spec);
  b->add_flag("--json", ba->json, "JSON output");
  b->add_option("--seconds", ba->budget, "time budget per measurement, 0.001 to 3600")->check(finite_range(0.001, 3600));
  b->add_flag("--profile", ba->profile, "also time each kernel");
  b->add_option("--busy", ba->busy, "time the compiled calls again while N background jobs compile C++ (like a parallel build), 0 to 64")
      ->check(CLI::Range(0, 64));
  b->add_option("--repeat", ba->repeat, "time the compiled calls in K fresh processes (with --busy: K quiet, K busy), 0 to 100")
      ->check(CLI::Range(0, 100));
  add_weights_option(b, ba->spec.weights, {"all"});
  add_device_option(b, ba->spec.device);
  b->add_flag("--autotune", ba->autotune, "also the program with its kernels' schedules tuned on this machine, against the rules' (side by side)");
  b->add_option("--steps", ba->steps, "--weights with --model llama: greedy tokens compared with f32's, 1 to 1024")->check(CLI::Range(1, 1024));
  b->add_flag("--skip-interpreter", ba->skip_interpreter, "do not run the interpreter (a model too large for it): outputs are not checked");
  b->add_flag("--child", *child, "(internal) the measurement of one fresh process, as JSON")->group("");
  b->add_option("--dump", ba->dump, "write inputs, weights and compiled outputs as .npy files to this folder");
  b->callback([ba, child] { *child ? bench_child(*ba) : run_benchmark(*ba); });

  auto ca = std::make_shared<CodegenOptions>();
  auto* c = app.add_subcommand("codegen", "write the generated C++ (or OpenCL C, or CUDA C) for a model");
  add_trace_options(c, ca->spec);
  add_size_options(c, ca->spec);
  c->add_option("-o,--out", ca->out, "output folder")->required();
  add_weights_option(c, ca->spec.weights);
  add_device_option(c, ca->spec.device);
  c->callback([ca] { write_codegen(*ca); });
}

}  // namespace tjc
