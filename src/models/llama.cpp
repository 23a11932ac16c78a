#include "models/llama.h"

#include <cmath>

#include "tensorjit/error.h"

namespace tj::models {

namespace {

const std::vector<LlamaConfig>& configs() {
  static const std::vector<LlamaConfig> c = {
      {"tiny", 128, 8, 2, 16, 344, 256, 512, 2, 10000.0, 1e-5},
      {"tinyllama", 2048, 32, 4, 64, 5632, 32000, 2048, 22, 10000.0, 1e-5},
      {"llama3-8b", 4096, 32, 8, 128, 14336, 128256, 131072, 32, 500000.0, 1e-5},
      // The size of all-MiniLM-L6-v2 (6 layers of width 384, 12 heads, 88 MB
      // of f32 weights with a 10,000-token vocabulary): a model of that
      // size, for compile-time and warm-start figures.
      {"minilm-size", 384, 12, 12, 32, 1536, 10000, 512, 6, 10000.0, 1e-5},
  };
  return c;
}

// HF's rotate_half convention: x = [x1, x2] -> [x1*c - x2*s, x2*c + x1*s].
Tensor apply_rope(const Tensor& x, const Tensor& c, const Tensor& s, int64_t head_dim) {
  int64_t half = head_dim / 2;
  Tensor x1 = x.slice(-1, 0, half);
  Tensor x2 = x.slice(-1, half, head_dim);
  return concat({x1 * c - x2 * s, x2 * c + x1 * s}, -1);
}

// [B,Hkv,S,D] -> [B,Hkv*group,S,D]: each KV head serves `group` query heads.
Tensor repeat_kv(const Tensor& kv, int64_t group) {
  if (group == 1) return kv;
  Dim B = kv.dim(0), H = kv.dim(1), S = kv.dim(2), D = kv.dim(3);
  Tensor e = expand(unsqueeze(kv, {2}), {B, H, group, S, D});
  return reshape(e, {B, H * group, S, D});
}

Tensor heads(const Tensor& x, Dim B, Dim T, int64_t h, int64_t d) {
  return permute(reshape(x, {B, T, h, d}), {0, 2, 1, 3});
}

}  // namespace

const LlamaConfig& llama_config(std::string_view name) {
  for (const auto& c : configs())
    if (c.name == name) return c;
  std::string known;
  for (const auto& c : configs()) known += (known.empty() ? "" : ", ") + c.name;
  throw Error("unknown config '" + std::string(name) + "' (known: " + known + ")");
}

std::vector<std::string> llama_config_names() {
  std::vector<std::string> r;
  for (const auto& c : configs()) r.push_back(c.name);
  return r;
}

LayerParams declare_layer_params(Tracer& t, const LlamaConfig& c, DType dt, const std::string& prefix) {
  int64_t d = c.d_model, q = c.n_heads * c.head_dim, kv = c.n_kv_heads * c.head_dim;
  return {t.param(prefix + "attn_norm", dt, {d}), t.param(prefix + "wq", dt, {d, q}),
          t.param(prefix + "wk", dt, {d, kv}),    t.param(prefix + "wv", dt, {d, kv}),
          t.param(prefix + "wo", dt, {q, d}),     t.param(prefix + "mlp_norm", dt, {d}),
          t.param(prefix + "w_gate", dt, {d, c.ffn}), t.param(prefix + "w_up", dt, {d, c.ffn}),
          t.param(prefix + "w_down", dt, {c.ffn, d})};
}

RopeTables declare_rope_tables(Tracer& t, const LlamaConfig& c, DType dt) {
  return {t.param("rope_cos", dt, {c.max_pos, c.head_dim / 2}), t.param("rope_sin", dt, {c.max_pos, c.head_dim / 2})};
}

LayerOut llama_layer(const LlamaConfig& c, const LayerParams& p, const RopeTables& rope, const Tensor& x,
                     const Tensor& pos, const Tensor& k_cache, const Tensor& v_cache, const LayerOptions& o) {
  Dim B = x.dim(0), T = x.dim(1), S = k_cache.dim(2);
  int64_t hd = c.head_dim, group = c.n_heads / c.n_kv_heads;
  double scale = 1.0 / std::sqrt(static_cast<double>(hd));

  // Attention block.
  Tensor h = rms_norm(x, p.attn_norm, c.eps);
  Tensor q = heads(linear(h, p.wq), B, T, c.n_heads, hd);
  Tensor k = heads(linear(h, p.wk), B, T, c.n_kv_heads, hd);
  Tensor v = heads(linear(h, p.wv), B, T, c.n_kv_heads, hd);
  Tensor positions = iota(x, T) + pos;
  Tensor cs = gather(rope.cos, positions);
  Tensor sn = gather(rope.sin, positions);
  q = apply_rope(q, cs, sn, hd);
  k = apply_rope(k, cs, sn, hd);
  Tensor kc = kv_write(k_cache, k, pos);
  Tensor vc = kv_write(v_cache, v, pos);
  Tensor attn;
  if (o.flash) {
    attn = flash_attn_causal(q, kc, vc, pos, scale);
  } else {
    Tensor scores = matmul(q, transpose(repeat_kv(kc, group))) * scale + causal_mask(pos, T, S, x.dtype());
    attn = matmul(softmax(scores, -1), repeat_kv(vc, group));
  }
  attn = reshape(permute(attn, {0, 2, 1, 3}), {B, T, c.n_heads * hd});
  Tensor h1 = x + linear(attn, p.wo);

  // SwiGLU MLP block.
  Tensor h2 = rms_norm(h1, p.mlp_norm, c.eps);
  Tensor m = linear(silu(linear(h2, p.w_gate)) * linear(h2, p.w_up), p.w_down);
  return {h1 + m, kc, vc};
}

Graph trace_llama_layer(const LlamaConfig& c, const Shapes& s, const LayerOptions& o) {
  Tracer t("llama_layer");
  Tensor x = t.input("x", s.dtype, {s.batch, s.tokens, c.d_model});
  Tensor pos = t.input("pos", DType::i64, {});
  Tensor kc = t.input("k_cache", s.dtype, {s.batch, c.n_kv_heads, s.kv_len, c.head_dim});
  Tensor vc = t.input("v_cache", s.dtype, {s.batch, c.n_kv_heads, s.kv_len, c.head_dim});
  RopeTables rope = declare_rope_tables(t, c, s.dtype);
  LayerParams p = declare_layer_params(t, c, s.dtype, "");
  LayerOut out = llama_layer(c, p, rope, x, pos, kc, vc, o);
  return t.finish({out.y, out.k_cache, out.v_cache});
}

namespace {

// The multi-layer model in `t`: tokens [B,T] from an input, pos and the
// caches as inputs; returns the logits, then each layer's k and v caches.
std::vector<Tensor> llama_model(Tracer& t, const LlamaConfig& c, const Shapes& s, int64_t layers, const LayerOptions& o) {
  if (layers < 1) throw Error("a model needs at least one layer");
  Tensor tokens = t.input("tokens", DType::i64, {s.batch, s.tokens});
  Tensor pos = t.input("pos", DType::i64, {});
  std::vector<Tensor> kcs, vcs;
  for (int64_t l = 0; l < layers; ++l) {
    Shape cache{s.batch, c.n_kv_heads, s.kv_len, c.head_dim};
    kcs.push_back(t.input("k_cache." + std::to_string(l), s.dtype, cache));
    vcs.push_back(t.input("v_cache." + std::to_string(l), s.dtype, cache));
  }
  Tensor embed = t.param("embed", s.dtype, {c.vocab, c.d_model});
  RopeTables rope = declare_rope_tables(t, c, s.dtype);
  Tensor x = gather(embed, tokens);
  std::vector<Tensor> outs = {Tensor()};
  for (int64_t l = 0; l < layers; ++l) {
    LayerParams p = declare_layer_params(t, c, s.dtype, "layers." + std::to_string(l) + ".");
    LayerOut out = llama_layer(c, p, rope, x, pos, kcs[static_cast<size_t>(l)], vcs[static_cast<size_t>(l)], o);
    x = out.y;
    outs.push_back(out.k_cache);
    outs.push_back(out.v_cache);
  }
  Tensor final_norm = t.param("final_norm", s.dtype, {c.d_model});
  Tensor lm_head = t.param("lm_head", s.dtype, {c.d_model, c.vocab});
  outs[0] = linear(rms_norm(x, final_norm, c.eps), lm_head);
  return outs;
}

}  // namespace

Graph trace_llama(const LlamaConfig& c, const Shapes& s, int64_t layers, const LayerOptions& o) {
  Tracer t("llama");
  return t.finish(llama_model(t, c, s, layers, o));
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  const Shape ls = logits.type().shape;  // a copy: the nodes added below may move the graph's types
  const int64_t last = static_cast<int64_t>(ls.size()) - 1;
  const Dim V = ls.back();
  Tensor m = amax(logits, {last}, true);
  Tensor lse = log(sum(exp(logits - m), {last}, true)) + m;
  Shape col = targets.type().shape;
  col.push_back(Dim(1));
  Shape row(ls.size(), Dim(1));
  row.back() = V;
  Tensor hit = eq(reshape(targets, col), reshape(iota(targets, V, targets.type().dtype), row));
  Tensor picked = sum(where(hit, logits, 0.0), {last}, true);
  std::vector<int64_t> all(ls.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  return mean(lse - picked, all);
}

Graph trace_llama_loss(const LlamaConfig& c, const Shapes& s, int64_t layers) {
  Tracer t("llama_loss");
  Shapes full = s;
  full.kv_len = s.tokens;  // the caches hold exactly the tokens: causal attention over them
  std::vector<Tensor> outs = llama_model(t, c, full, layers, {});
  Tensor targets = t.input("targets", DType::i64, {s.batch, s.tokens});
  return t.finish({cross_entropy(outs[0], targets)});
}

Graph trace_mlp(const LlamaConfig& c, const Shapes& s) {
  Tracer t("mlp");
  Tensor x = t.input("x", s.dtype, {s.batch, s.tokens, c.d_model});
  Tensor w1 = t.param("w1", s.dtype, {c.d_model, c.ffn});
  Tensor w2 = t.param("w2", s.dtype, {c.ffn, c.d_model});
  return t.finish({linear(gelu(linear(x, w1)), w2)});
}

std::vector<double> rope_table(const LlamaConfig& c, bool sine) {
  int64_t half = c.head_dim / 2;
  std::vector<double> t(static_cast<size_t>(c.max_pos * half));
  for (int64_t p = 0; p < c.max_pos; ++p)
    for (int64_t j = 0; j < half; ++j) {
      double freq = std::pow(c.rope_base, -2.0 * static_cast<double>(j) / static_cast<double>(c.head_dim));
      double a = static_cast<double>(p) * freq;
      t[static_cast<size_t>(p * half + j)] = sine ? std::sin(a) : std::cos(a);
    }
  return t;
}

}  // namespace tj::models

namespace tj::models {

NDArray rope_table_array(const LlamaConfig& c, bool sine, DType dtype) {
  return NDArray::from(dtype, {c.max_pos, c.head_dim / 2}, rope_table(c, sine));
}

}  // namespace tj::models

namespace tj::models {

int annotate_megatron(Graph& g, const LlamaConfig& c, const std::string& axis) {
  const int at = g.mesh().axis(axis);
  if (at < 0) throw Error("annotate_megatron: the graph's mesh " + g.mesh().str() + " has no axis '" + axis + "'");
  const int64_t n = g.mesh().axes[static_cast<size_t>(at)].size;
  const bool kv = c.n_kv_heads % n == 0;
  int annotated = 0;
  for (ValueId p : g.params()) {
    const std::string& name = g.node(p).name;
    const std::string base = name.substr(name.rfind('.') == std::string::npos ? 0 : name.rfind('.') + 1);
    int dim = -1;
    if (base == "wq" || base == "w_gate" || base == "w_up" || (kv && (base == "wk" || base == "wv"))) dim = 1;
    if (base == "wo" || base == "w_down") dim = 0;
    if (dim < 0 || g.type(p).rank() != 2) continue;
    Sharding s;
    s.dims.assign(2, {});
    s.dims[static_cast<size_t>(dim)] = {axis};
    check_sharding(g.mesh(), g.type(p), s);
    g.set_sharding(p, s);
    ++annotated;
  }
  return annotated;
}

}  // namespace tj::models
