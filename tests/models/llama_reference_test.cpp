// The traced Llama layer, run on the interpreter in f64, against the
// independent plain-loop reference: prefill, decode, prefill followed by
// decode steps that chain the caches, and the flash_attn form.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "llama_reference.h"
#include "models/llama.h"
#include "reference/interpreter.h"
#include "reference/random_inputs.h"

namespace tj {
namespace {

using models::LayerOptions;
using models::LlamaConfig;

constexpr double kTolerance = 1e-13;

const LlamaConfig& tiny() { return models::llama_config("tiny"); }

// max|got - want| / max|want|.
double max_rel_err(const std::vector<double>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    diff = std::max(diff, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return diff / std::max(scale, std::numeric_limits<double>::min());
}

ref::LlamaLayerWeights weights_of(const Bindings& b) {
  auto v = [&](const char* name) { return b.at(name).to_vector(); };
  return {v("rope_cos"), v("rope_sin"), v("attn_norm"), v("wq"),   v("wk"),  v("wv"),
          v("wo"),       v("mlp_norm"), v("w_gate"),    v("w_up"), v("w_down")};
}

Graph trace(int64_t batch, int64_t tokens, int64_t kv_len, bool flash) {
  return models::trace_llama_layer(tiny(), models::Shapes{batch, tokens, kv_len, DType::f64}, LayerOptions{flash});
}

// Seeded random inputs with the real rope tables and the given position.
Bindings inputs_for(const Graph& g, uint64_t seed, int64_t pos) {
  const LlamaConfig& c = tiny();
  Bindings b = random_inputs(g, {seed});
  b["pos"] = NDArray::scalar(DType::i64, static_cast<double>(pos));
  b["rope_cos"] = models::rope_table_array(c, false, DType::f64);
  b["rope_sin"] = models::rope_table_array(c, true, DType::f64);
  return b;
}

struct Step {
  std::vector<NDArray> got;    // interpreter: y, k_cache', v_cache'
  ref::LlamaLayerResult want;  // reference
};

// Runs both on the same bindings; the reference reads the caches from `ref_k`
// and `ref_v` so that chained runs keep the two sides independent.
Step run_both(const Graph& g, const Bindings& b, const std::vector<double>& ref_k, const std::vector<double>& ref_v) {
  const NDArray& x = b.at("x");
  const int64_t batch = x.shape()[0], kv_len = b.at("k_cache").shape()[2];
  const auto pos = static_cast<int64_t>(b.at("pos").get(0));
  Step s;
  s.got = interpret(g, b, {DType::f64});
  s.want = ref::llama_layer_reference(tiny(), weights_of(b), x.to_vector(), batch, pos, ref_k, ref_v, kv_len);
  EXPECT_EQ(s.got.size(), 3u);
  return s;
}

Step run_both(const Graph& g, const Bindings& b) {
  return run_both(g, b, b.at("k_cache").to_vector(), b.at("v_cache").to_vector());
}

// Compares all three outputs and guards against a vacuous pass: the layer must
// change x, and the caches must have changed in the written rows.
void expect_match(const std::string& name, const Step& s, const Bindings& b) {
  ASSERT_EQ(s.got.size(), 3u);
  const double ey = max_rel_err(s.got[0].to_vector(), s.want.y);
  const double ek = max_rel_err(s.got[1].to_vector(), s.want.k_cache);
  const double ev = max_rel_err(s.got[2].to_vector(), s.want.v_cache);
  std::printf("[ llama ref ] %-28s y %.3g  k_cache %.3g  v_cache %.3g\n", name.c_str(), ey, ek, ev);
  EXPECT_LE(ey, kTolerance) << name;
  EXPECT_LE(ek, kTolerance) << name;
  EXPECT_LE(ev, kTolerance) << name;

  EXPECT_GT(max_rel_err(s.want.y, b.at("x").to_vector()), 1e-2) << name << ": y is x";
  EXPECT_GT(max_rel_err(s.want.k_cache, b.at("k_cache").to_vector()), 1e-2) << name << ": k_cache unchanged";
  EXPECT_GT(max_rel_err(s.want.v_cache, b.at("v_cache").to_vector()), 1e-2) << name << ": v_cache unchanged";
}

struct Case {
  const char* name;
  int64_t batch, tokens, pos, kv_len;
  bool flash;
  uint64_t seed;
};

void check_case(const Case& c) {
  const Graph g = trace(c.batch, c.tokens, c.kv_len, c.flash);
  const Bindings b = inputs_for(g, c.seed, c.pos);
  expect_match(c.name, run_both(g, b), b);
}

TEST(LlamaReference, PrefillFromStart) { check_case({"prefill B1 T7 pos0 S7", 1, 7, 0, 7, false, 1}); }

TEST(LlamaReference, PrefillFromStartBatch2) { check_case({"prefill B2 T7 pos0 S7", 2, 7, 0, 7, false, 2}); }

// Cache rows before pos are earlier context; rows from pos+T on must be masked.
TEST(LlamaReference, PrefillAfterContext) { check_case({"prefill B1 T5 pos3 S12", 1, 5, 3, 12, false, 3}); }

TEST(LlamaReference, Decode) { check_case({"decode B1 T1 pos9 S16", 1, 1, 9, 16, false, 4}); }

TEST(LlamaReference, FlashPrefill) { check_case({"flash prefill B1 T5 pos3 S12", 1, 5, 3, 12, true, 5}); }

TEST(LlamaReference, FlashDecode) { check_case({"flash decode B1 T1 pos9 S16", 1, 1, 9, 16, true, 6}); }

// Prefill into zeroed caches, then decode steps; each side feeds its own
// updated caches into its next step.
TEST(LlamaReference, PrefillThenDecode) {
  const LlamaConfig& c = tiny();
  const int64_t kPrefill = 6, kKvLen = 10;
  const Graph prefill = trace(1, kPrefill, kKvLen, false);
  const Graph decode = trace(1, 1, kKvLen, false);

  Bindings b = inputs_for(prefill, 7, 0);
  b["k_cache"] = NDArray(DType::f64, {1, c.n_kv_heads, kKvLen, c.head_dim});
  b["v_cache"] = NDArray(DType::f64, {1, c.n_kv_heads, kKvLen, c.head_dim});
  Step s = run_both(prefill, b);
  expect_match("chain prefill T6 pos0 S10", s, b);

  for (int64_t pos = kPrefill; pos < kKvLen; ++pos) {
    // Same weights as the prefill; a fresh token embedding per step.
    b["x"] = random_inputs(decode, {static_cast<uint64_t>(100 + pos)}).at("x");
    b["pos"] = NDArray::scalar(DType::i64, static_cast<double>(pos));
    b["k_cache"] = s.got[1];
    b["v_cache"] = s.got[2];
    const std::vector<double> ref_k = s.want.k_cache, ref_v = s.want.v_cache;
    s = run_both(decode, b, ref_k, ref_v);
    expect_match("chain decode pos" + std::to_string(pos), s, b);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace tj
