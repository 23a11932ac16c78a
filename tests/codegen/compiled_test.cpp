// Compiled code against the interpreter: the models, prefill and decode,
// f32 and f64, and random graphs.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "ir/text.h"
#include "models/llama.h"
#include "passes/pipeline.h"
#include "runtime/executable.h"
#include "runtime/random_inputs.h"
#include "support/random_graph.h"

namespace tj {
namespace {

class Compiled : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    static std::string dir = std::string(::testing::TempDir()) + "tj_compiled_" + std::to_string(::getpid());
    setenv("TJ_CACHE_DIR", dir.c_str(), 1);
  }
};

// Splits seeded random bindings into params and inputs.
void split(const Graph& g, const Bindings& all, Bindings* params, Bindings* inputs) {
  for (const auto& [k, v] : all) (g.node(g.find(k)).op == Op::param ? *params : *inputs)[k] = v;
}

double check(const Graph& g, double pos, DType dt, uint64_t seed = 1) {
  RandomInputOptions ro;
  ro.seed = seed;
  if (g.find("pos") >= 0) ro.fixed["pos"] = pos;
  Bindings all = random_inputs(g, ro);
  auto want = interpret(g, all, {dt});
  Bindings params, inputs;
  split(g, all, &params, &inputs);
  Executable exe = Executable::compile(g, params);
  EXPECT_TRUE(exe.stats().compiled);
  auto got = exe.run(inputs);
  Difference d = compare_outputs(got, want);
  EXPECT_FALSE(d.max_abs == 0 && dt == DType::f32 && g.size() > 20) << "suspiciously identical";
  std::printf("[ compiled ] %s %s: %zu kernels, max rel diff %.2e\n", g.name().c_str(), std::string(dtype_name(dt)).c_str(),
              exe.stats().kernels, d.max_rel);
  return d.max_rel;
}

TEST_F(Compiled, TinyLayerPrefillAndDecode) {
  const auto& c = models::llama_config("tiny");
  for (DType dt : {DType::f32, DType::f64}) {
    double tol = dt == DType::f32 ? 1e-5 : 1e-12;
    EXPECT_LE(check(models::trace_llama_layer(c, {1, 16, 16, dt}), 0, dt), tol);
    EXPECT_LE(check(models::trace_llama_layer(c, {2, 5, 12, dt}), 3, dt), tol);
    EXPECT_LE(check(models::trace_llama_layer(c, {1, 1, 64, dt}), 40, dt), tol);
  }
}

}  // namespace
}  // namespace tj
