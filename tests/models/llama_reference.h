// An independent double-precision Llama decoder layer in plain loops, written
// from the math rather than from src/models/llama.cpp, so that the traced
// graph (run on the interpreter) has something outside the project to agree
// with. Uses no IR, tracer or interpreter; only the config struct for sizes.
//
// Layouts are row-major: x and y [B,T,d], caches [B,Hkv,S,head_dim], weights
// [in,out] (y = x @ W), rope tables [max_pos, head_dim/2].
#pragma once

#include <cstdint>
#include <vector>

#include "models/llama.h"

namespace tj::ref {

struct LlamaLayerWeights {
  std::vector<double> rope_cos, rope_sin;
  std::vector<double> attn_norm, wq, wk, wv, wo;
  std::vector<double> mlp_norm, w_gate, w_up, w_down;
};

struct LlamaLayerResult {
  std::vector<double> y, k_cache, v_cache;
};

// T = x.size() / (batch * d_model) tokens at positions [pos, pos+T), attending
// causally over a cache of kv_len rows. Throws std::invalid_argument on sizes
// that do not fit the config or on pos + T > min(kv_len, max_pos).
LlamaLayerResult llama_layer_reference(const models::LlamaConfig& c, const LlamaLayerWeights& w,
                                       const std::vector<double>& x, int64_t batch, int64_t pos,
                                       const std::vector<double>& k_cache, const std::vector<double>& v_cache,
                                       int64_t kv_len);

}  // namespace tj::ref
