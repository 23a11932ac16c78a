#include "llama_reference.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace tj::ref {
namespace {

using Vec = std::vector<double>;

void expect_size(const Vec& v, int64_t n, const char* what) {
  if (static_cast<int64_t>(v.size()) != n)
    throw std::invalid_argument(std::string("llama_layer_reference: ") + what + " has " +
                                std::to_string(v.size()) + " values, expected " + std::to_string(n));
}

// [rows, in] @ [in, out] -> [rows, out].
Vec matmul(const Vec& x, const Vec& w, int64_t rows, int64_t in, int64_t out) {
  Vec y(static_cast<size_t>(rows * out), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < in; ++k) {
      const double a = x[r * in + k];
      for (int64_t o = 0; o < out; ++o) y[r * out + o] += a * w[k * out + o];
    }
  return y;
}

Vec rms_norm(const Vec& x, const Vec& gain, int64_t rows, int64_t d, double eps) {
  Vec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += x[r * d + j] * x[r * d + j];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
    for (int64_t j = 0; j < d; ++j) y[r * d + j] = x[r * d + j] * inv * gain[j];
  }
  return y;
}

// In place on t [B,T,H,D], rotate_half convention: pairs are (j, j + D/2).
void rope(Vec& t, const models::LlamaConfig& c, const LlamaLayerWeights& w, int64_t batch, int64_t tokens,
          int64_t heads, int64_t pos) {
  const int64_t D = c.head_dim, half = D / 2;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < tokens; ++i) {
      const double* cs = &w.rope_cos[(pos + i) * half];
      const double* sn = &w.rope_sin[(pos + i) * half];
      for (int64_t h = 0; h < heads; ++h) {
        double* v = &t[((b * tokens + i) * heads + h) * D];
        for (int64_t j = 0; j < half; ++j) {
          const double lo = v[j], hi = v[j + half];
          v[j] = lo * cs[j] - hi * sn[j];
          v[j + half] = hi * cs[j] + lo * sn[j];
        }
      }
    }
}

// Copies token rows of src [B,T,Hkv,D] into rows [pos, pos+T) of cache [B,Hkv,S,D].
void write_cache(Vec& cache, const Vec& src, int64_t batch, int64_t tokens, int64_t kv_heads, int64_t D,
                 int64_t S, int64_t pos) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < tokens; ++i)
      for (int64_t g = 0; g < kv_heads; ++g)
        std::copy_n(&src[((b * tokens + i) * kv_heads + g) * D], D, &cache[((b * kv_heads + g) * S + pos + i) * D]);
}

// Grouped-query causal attention of q [B,T,Hq,D] over the caches; returns
// [B,T,Hq*D] with column head*D + dim.
Vec attention(const Vec& q, const Vec& k_cache, const Vec& v_cache, const models::LlamaConfig& c, int64_t batch,
              int64_t tokens, int64_t S, int64_t pos) {
  const int64_t Hq = c.n_heads, Hkv = c.n_kv_heads, D = c.head_dim, group = Hq / Hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  Vec out(static_cast<size_t>(batch * tokens * Hq * D), 0.0);
  Vec p(static_cast<size_t>(S));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < tokens; ++i)
      for (int64_t h = 0; h < Hq; ++h) {
        const int64_t g = h / group;
        const double* qi = &q[((b * tokens + i) * Hq + h) * D];
        const double* kg = &k_cache[(b * Hkv + g) * S * D];
        const double* vg = &v_cache[(b * Hkv + g) * S * D];
        const int64_t allowed = pos + i + 1;  // keys j <= pos + i
        double mx = -INFINITY;
        for (int64_t j = 0; j < allowed; ++j) {
          double s = 0;
          for (int64_t e = 0; e < D; ++e) s += qi[e] * kg[j * D + e];
          p[j] = s * scale;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < allowed; ++j) sum += (p[j] = std::exp(p[j] - mx));
        double* o = &out[((b * tokens + i) * Hq + h) * D];
        for (int64_t j = 0; j < allowed; ++j)
          for (int64_t e = 0; e < D; ++e) o[e] += p[j] / sum * vg[j * D + e];
      }
  return out;
}

}  // namespace

LlamaLayerResult llama_layer_reference(const models::LlamaConfig& c, const LlamaLayerWeights& w, const Vec& x,
                                       int64_t batch, int64_t pos, const Vec& k_cache, const Vec& v_cache,
                                       int64_t kv_len) {
  const int64_t d = c.d_model, Hq = c.n_heads, Hkv = c.n_kv_heads, D = c.head_dim, F = c.ffn, S = kv_len;
  if (batch <= 0 || d <= 0 || x.size() % static_cast<size_t>(batch * d) != 0)
    throw std::invalid_argument("llama_layer_reference: x is not [B,T,d]");
  if (D % 2 != 0 || Hkv <= 0 || Hq % Hkv != 0)
    throw std::invalid_argument("llama_layer_reference: head_dim must be even and n_heads a multiple of n_kv_heads");
  const int64_t T = static_cast<int64_t>(x.size()) / (batch * d);
  if (pos < 0 || pos + T > S || pos + T > c.max_pos)
    throw std::invalid_argument("llama_layer_reference: tokens [pos, pos+T) do not fit the cache or rope tables");
  expect_size(k_cache, batch * Hkv * S * D, "k_cache");
  expect_size(v_cache, batch * Hkv * S * D, "v_cache");
  expect_size(w.rope_cos, c.max_pos * D / 2, "rope_cos");
  expect_size(w.rope_sin, c.max_pos * D / 2, "rope_sin");
  expect_size(w.attn_norm, d, "attn_norm");
  expect_size(w.wq, d * Hq * D, "wq");
  expect_size(w.wk, d * Hkv * D, "wk");
  expect_size(w.wv, d * Hkv * D, "wv");
  expect_size(w.wo, Hq * D * d, "wo");
  expect_size(w.mlp_norm, d, "mlp_norm");
  expect_size(w.w_gate, d * F, "w_gate");
  expect_size(w.w_up, d * F, "w_up");
  expect_size(w.w_down, F * d, "w_down");

  const int64_t rows = batch * T;
  const Vec h = rms_norm(x, w.attn_norm, rows, d, c.eps);
  Vec q = matmul(h, w.wq, rows, d, Hq * D);
  Vec k = matmul(h, w.wk, rows, d, Hkv * D);
  const Vec v = matmul(h, w.wv, rows, d, Hkv * D);
  rope(q, c, w, batch, T, Hq, pos);
  rope(k, c, w, batch, T, Hkv, pos);

  LlamaLayerResult r{{}, k_cache, v_cache};
  write_cache(r.k_cache, k, batch, T, Hkv, D, S, pos);
  write_cache(r.v_cache, v, batch, T, Hkv, D, S, pos);

  const Vec attn = attention(q, r.k_cache, r.v_cache, c, batch, T, S, pos);
  Vec h1 = matmul(attn, w.wo, rows, Hq * D, d);
  for (size_t i = 0; i < h1.size(); ++i) h1[i] += x[i];

  const Vec h2 = rms_norm(h1, w.mlp_norm, rows, d, c.eps);
  Vec gate = matmul(h2, w.w_gate, rows, d, F);
  const Vec up = matmul(h2, w.w_up, rows, d, F);
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
  r.y = matmul(gate, w.w_down, rows, F, d);
  for (size_t i = 0; i < r.y.size(); ++i) r.y[i] += h1[i];
  return r;
}

}  // namespace tj::ref
