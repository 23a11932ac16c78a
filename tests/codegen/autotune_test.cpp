// Autotuning: the choice among measured candidates (on made-up times), every
// candidate schedule against the interpreter, and the choices reused from
// the tuning cache without measuring.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "codegen/cpp/emit.h"
#include "compiler/compile.h"
#include "models/llama.h"
#include "passes/pipeline.h"
#include "reference/random_inputs.h"
#include "tune/autotune.h"

namespace tj {
namespace {

TEST(Autotune, ACandidateWinsOnlyWhenClearlyAndSteadilyFaster) {
  // Made-up seconds per call for candidates 0 (the rule's), 1 and 2.
  auto times = [](std::vector<double> t) { return [t](size_t i) { return t[i]; }; };
  EXPECT_EQ(measure_candidates(3, times({2e-4, 1e-4, 3e-4})).winner, 1);
  EXPECT_EQ(measure_candidates(3, times({2e-4, 1.99e-4, 3e-4})).winner, 0);  // within 3%: the rule stays
  // Scattered times: noisy, the rule stays whatever the medians say.
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> wild(1e-5, 1e-3);
  TuningResult r = measure_candidates(2, [&](size_t i) { return i == 0 ? wild(rng) : 1e-5; });
  EXPECT_TRUE(r.noisy);
  EXPECT_EQ(r.winner, 0);
  // Faster in only half of the rounds: not a winner.
  int call = 0;
  r = measure_candidates(2, [&](size_t i) { return i == 0 ? 1e-4 : (++call % 2 ? 0.5e-4 : 1.01e-4); });
  EXPECT_EQ(r.winner, 0);
}

// A decode layer of width 384, f32 and bf16 weights: its three GEMVs split
// over the pool are tuned (the 384 x 384 one and the attention run as a
// team, whose split is measured at run time, and are not; int8 GEMVs read
// packed weights, which have one schedule).
TEST(Autotune, EveryCandidateIsCorrectAndChoicesAreReused) {
  const std::string dir = std::string(::testing::TempDir()) + "tj_autotune_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  setenv("TJ_CACHE_DIR", dir.c_str(), 1);
  Graph g = models::trace_llama_layer(models::llama_config("minilm-size"), {1, 1, 16, DType::f32});
  RandomInputOptions ro;
  ro.seed = 4;
  ro.fixed["pos"] = 15;
  Bindings all = random_inputs(g, ro), params, inputs;
  for (const auto& [k, v] : all) (g.node(g.find(k)).op == Op::param ? params : inputs)[k] = v;
  for (DType w : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(w));
    CompileOptions co;
    co.autotune = true;
    co.weights = w;
    Executable first = tj::compile(g, params, co);
    ASSERT_TRUE(first.stats().compiled);
    const CompileStats& s1 = first.stats();
    EXPECT_EQ(s1.tunable_kernels, 3);  // QKV (merged), gate and up (merged), down
    EXPECT_EQ(s1.tuned_now + s1.tuned_from_cache, s1.tunable_kernels);
    // Entries of more than `bytes` (none at all on a machine too busy to
    // tell candidates apart: noisy measurements are not recorded).
    auto entries = [&](uintmax_t bytes) {
      size_t n = 0;
      if (std::filesystem::exists(dir + "/tuning"))
        for (const auto& e : std::filesystem::directory_iterator(dir + "/tuning")) n += e.is_regular_file() && e.file_size() > bytes;
      return n;
    };
    // A second compilation measures only what the first did not record (a
    // noisy measurement); usually nothing.
    Executable again = tj::compile(g, params, co);
    EXPECT_EQ(again.stats().tuned_now + again.stats().tuned_from_cache, s1.tunable_kernels);
    if (w == DType::f32) {
      // A damaged entry is measured again and rewritten, not an error. Every
      // entry there is now is damaged: the second compilation may have
      // recorded what the first found too noisy.
      if (std::filesystem::exists(dir + "/tuning"))
        for (const auto& e : std::filesystem::directory_iterator(dir + "/tuning")) std::ofstream(e.path()) << "{\"format\": ";
      Executable damaged = tj::compile(g, params, co);
      EXPECT_EQ(damaged.stats().tuned_from_cache, 0);
      EXPECT_EQ(damaged.stats().tuned_now, s1.tunable_kernels);
      const size_t recorded = entries(20);
      again = tj::compile(g, params, co);
      EXPECT_EQ(static_cast<size_t>(again.stats().tuned_from_cache), recorded);
      if (again.stats().tuned_now == 0) {
        EXPECT_EQ(again.stats().tuning_seconds, 0);
      }
    }

    // Each candidate in turn, recorded as the winner of every kernel.
    EmittedProgram p = emit_cpp(first.optimized(), first.schedule(), {}, true);
    ASSERT_EQ(static_cast<int>(p.tunable.size()), s1.tunable_kernels);
    size_t most = 0;
    for (const auto& t : p.tunable) most = std::max(most, t.labels.size());
    EXPECT_GE(most, 4u);
    for (size_t c = 0; c < most; ++c) {
      for (const auto& t : p.tunable) {
        TuningResult r;
        r.winner = static_cast<int>(std::min(c, t.labels.size() - 1));
        r.median_s.assign(t.labels.size(), 1e-6);
        r.win_share.assign(t.labels.size(), 1);
        record_choice(t.signature, t.labels, r);
      }
      Executable e = tj::compile(g, params, co);
      EXPECT_EQ(e.stats().tuned_now, 0) << "candidate " << c;
      Bindings in = inputs, ref = e.held_params();
      for (const auto& [k, v] : inputs) ref[k] = v;
      std::vector<NDArray> got = e.run(in);
      EXPECT_LE(compare_outputs(got, interpret(e.optimized(), ref, {DType::f32})).max_rel, 1e-5) << "candidate " << c;
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tj
