// Models written with the tracing frontend: an MLP, a Llama-style decoder
// layer, and a multi-layer Llama (embedding, N layers, final norm, LM head).
//
// The layer takes T tokens at start position `pos` and a KV cache of length
// S; it writes the new K/V rows at `pos` (kv_write) and attends over the whole
// cache with a causal mask, so prefill (T tokens) and decode (T = 1) are one
// form. A plain prefill is the case S = T at pos 0 (tjc's default).
// In the unfused form masked keys are excluded by adding -inf to their scores,
// so they must hold finite values (a NaN there poisons the row, as in PyTorch).
// Weights are [in, out]: y = x @ W.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "tensorjit/ndarray.h"
#include "tensorjit/nn.h"
#include "tensorjit/tensor.h"

namespace tj::models {

struct LlamaConfig {
  std::string name;
  int64_t d_model, n_heads, n_kv_heads, head_dim, ffn, vocab, max_pos, n_layers;
  double rope_base, eps;
};

// "tiny", "tinyllama", "llama3-8b", "minilm-size"; throws tj::Error naming the known ones.
const LlamaConfig& llama_config(std::string_view name);
std::vector<std::string> llama_config_names();

struct LayerParams {
  Tensor attn_norm, wq, wk, wv, wo, mlp_norm, w_gate, w_up, w_down;
};
struct RopeTables {
  Tensor cos, sin;  // [max_pos, head_dim/2]
};
struct LayerOut {
  Tensor y, k_cache, v_cache;
};
struct LayerOptions {
  bool flash = false;  // emit flash_attn directly instead of the unfused form
};

LayerParams declare_layer_params(Tracer& t, const LlamaConfig& c, DType dt, const std::string& prefix);
RopeTables declare_rope_tables(Tracer& t, const LlamaConfig& c, DType dt);

// x [B,T,d], pos i64[], k_cache/v_cache [B,Hkv,S,head_dim].
LayerOut llama_layer(const LlamaConfig& c, const LayerParams& p, const RopeTables& rope, const Tensor& x,
                     const Tensor& pos, const Tensor& k_cache, const Tensor& v_cache, const LayerOptions& o = {});

struct Shapes {
  Dim batch = 1;
  Dim tokens = 1;
  Dim kv_len = 1;
  DType dtype = DType::f32;
};

// Inputs x, pos, k_cache, v_cache; outputs y, k_cache', v_cache'.
Graph trace_llama_layer(const LlamaConfig& c, const Shapes& s, const LayerOptions& o = {});
// Inputs tokens i64[B,T], pos, k_cache.i, v_cache.i; outputs logits, then each
// layer's k and v caches.
Graph trace_llama(const LlamaConfig& c, const Shapes& s, int64_t layers, const LayerOptions& o = {});
// The language-modelling loss of the multi-layer model: inputs tokens and
// targets i64[B,T] (the next token of each), pos (0) and zero caches of
// length T (k_cache.i, v_cache.i: the layer's one form); output the mean
// cross-entropy of the logits against the targets (f32[]).
Graph trace_llama_loss(const LlamaConfig& c, const Shapes& s, int64_t layers);
// The cross-entropy of logits [..., V] against integer targets [...]: the
// mean of logsumexp(logits) - logits[target].
Tensor cross_entropy(const Tensor& logits, const Tensor& targets);
// Megatron's tensor parallelism for a traced layer or model of config c
// over mesh axis `axis` (the graph's mesh must have it): the Q, gate and up
// projections split by columns, O and down by rows, K and V by columns
// where the axis divides the KV heads (whole otherwise: each device then
// computes them all and reads its query heads' ones). Params are found by
// name (wq, layers.0.wq, ...); the rest is left to propagate_shardings.
// Returns how many params it annotated.
int annotate_megatron(Graph& g, const LlamaConfig& c, const std::string& axis);

// x [B,T,d] @ w1 [d,ffn] -> gelu -> @ w2 [ffn,d].
Graph trace_mlp(const LlamaConfig& c, const Shapes& s);

// cos/sin tables: table[p][j] = cos(p * base^(-2j/head_dim)), j < head_dim/2.
std::vector<double> rope_table(const LlamaConfig& c, bool sine);
// The same as the [max_pos, head_dim/2] array bound to param rope_cos / rope_sin.
NDArray rope_table_array(const LlamaConfig& c, bool sine, DType dtype);

}  // namespace tj::models
