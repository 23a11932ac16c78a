// ONNX converter: the Attention op (opset 23 and later), as the ops its
// function body uses, in the form match_attention makes one flash_attn.
#include <cmath>
#include <optional>

#include "frontend/onnx/context.h"

namespace tj::onnx_import {

namespace {

// The Attention op (opset 23): Q, K, V as [B, H, S, D], or [B, S, H*D] with
// q_num_heads and kv_num_heads; past_key/past_value concatenated before K and
// V (returned as present_key/present_value); an attn_mask (bool: attend where
// true; float: added) broadcast to the scores and padded with -inf up to the
// keys; is_causal: query i sees keys j <= i + the past's length; grouped KV
// heads repeated (head h reads KV head h / (Hq/Hkv)); both operands scaled by
// sqrt(scale) (default 1/sqrt(D)); softcap squashes the scores; rows with
// no visible key give 0. Written as the ops the spec's function body uses,
// so match_attention makes it one flash_attn (without softcap). Not
// supported: nonpad_kv_seqlen, sliding windows, the qk_matmul_output output.
R attention_(Ctx& c) {
  const onnx::NodeProto& n = *c.node;
  if (c.has_input(6)) c.unsupported("Attention with nonpad_kv_seqlen is not supported");
  if (c.attr_int("left_window_size", -1) != -1 || c.attr_int("right_window_size", -1) != -1)
    c.unsupported("Attention with a sliding window is not supported");
  if (n.output_size() > 3 && !n.output(3).empty()) c.unsupported("Attention's qk_matmul_output output is not supported");
  if (c.has_input(4) != c.has_input(5)) c.fail("past_key and past_value come together");
  Tensor q = c.in(0), k = c.in(1), val = c.in(2);
  const bool three_d = q.rank() == 3;
  if (q.rank() != k.rank() || q.rank() != val.rank() || (q.rank() != 3 && q.rank() != 4)) c.fail("Q, K and V must all be 3-D or all 4-D");
  if (three_d) {
    int64_t hq = c.attr_int("q_num_heads", 0), hkv = c.attr_int("kv_num_heads", 0);
    if (hq <= 0 || hkv <= 0) c.fail("3-D Attention needs q_num_heads and kv_num_heads");
    auto heads = [&](const Tensor& x, int64_t h, const char* what) {
      int64_t hidden = static_dim(c, x, 2, "Attention over a symbolic hidden size");
      if (hidden % h != 0) c.fail(std::string(what) + "'s hidden size " + std::to_string(hidden) + " is not a multiple of its heads " + std::to_string(h));
      return permute(reshape(x, {x.shape()[0], x.shape()[1], Dim(h), Dim(hidden / h)}), {0, 2, 1, 3});
    };
    q = heads(q, hq, "Q"), k = heads(k, hkv, "K"), val = heads(val, hkv, "V");
  }
  if (c.has_input(4)) k = concat({c.in(4), k}, 2), val = concat({c.in(5), val}, 2);
  Tensor present_k = k, present_v = val;
  const DType dt = q.dtype();
  int64_t D = static_dim(c, q, 3, "Attention over a symbolic head size");
  double scale = c.attr_float("scale", 1.0 / std::sqrt(static_cast<double>(D)));
  Dim T = q.shape()[2], S = k.shape()[2];
  // The additive bias over [.., T, S].
  std::optional<Tensor> bias;
  if (c.has_input(3)) {
    Tensor m = c.in(3);
    if (m.rank() < 1) c.fail("attn_mask needs rank 1 or more");
    Dim ms = m.shape().back();
    if (ms != S) {  // shorter than the keys: the rest masked
      if (!ms.is_const() || !S.is_const() || ms.value() > S.value()) c.unsupported("Attention with an attn_mask whose key length does not fit the keys");
      {
        std::vector<int64_t> b(static_cast<size_t>(m.rank()), 0), e = b;
        e.back() = S.value() - ms.value();
        m = pad(m, b, e, PadMode::constant, c.scalar(m.dtype() == DType::boolean ? 0 : -INFINITY, m.dtype()));
      }
    }
    bias = m.dtype() == DType::boolean ? where(m, c.scalar(0, dt), c.scalar(-INFINITY, dt)) : (m.dtype() == dt ? m : cast(m, dt));
  }
  if (c.attr_int("is_causal", 0)) {
    Dim offset = c.has_input(4) ? c.in(4).shape()[2] : Dim(0);  // the past's length
    Tensor i = reshape(iota(q, T), {T, Dim(1)}), j = reshape(iota(q, S), {Dim(1), S});
    Tensor causal = where(le(j, i + dims_value(c, {offset}, true).t), c.scalar(0, dt), c.scalar(-INFINITY, dt));
    bias = bias ? *bias + causal : causal;
  }
  // Grouped KV heads, each repeated for its query heads (the form match_attention knows).
  Dim hq = q.shape()[1], hkv = k.shape()[1];
  if (hq != hkv) {
    if (!hq.is_const() || !hkv.is_const() || hq.value() % hkv.value() != 0) c.fail("query heads " + hq.str() + " are not a multiple of KV heads " + hkv.str());
    int64_t g = hq.value() / hkv.value();
    auto repeat = [&](const Tensor& x) {
      Shape wide = {x.shape()[0], hkv, Dim(g), x.shape()[2], x.shape()[3]};
      return reshape(expand(unsqueeze(x, {2}), wide), {x.shape()[0], hq, x.shape()[2], x.shape()[3]});
    };
    k = repeat(k), val = repeat(val);
  }
  Tensor root = c.scalar(std::sqrt(scale), dt);
  Tensor s = matmul(q * root, permute(k, {0, 1, 3, 2}) * root);
  // softcap: the scores squashed into (-softcap, softcap) before the mask
  // (so -inf stays -inf).
  if (double cap = c.attr_float("softcap", 0); cap > 0) s = tanh(s * c.scalar(1 / cap, dt)) * c.scalar(cap, dt);
  if (bias) s = s + *bias;
  // softmax_precision: the softmax in that type, then back.
  Tensor p;
  if (const auto* sp = c.attr("softmax_precision"); sp && dtype_of_onnx(static_cast<int32_t>(sp->i()), "softmax_precision") != dt)
    p = cast(softmax(cast(s, dtype_of_onnx(static_cast<int32_t>(sp->i()), "softmax_precision")), -1), dt);
  else
    p = softmax(s, -1);
  p = where(ne(p, p), c.scalar(0, dt), p);  // no visible key: 0, not NaN
  Tensor y = matmul(p, val);
  if (three_d) y = reshape(permute(y, {0, 2, 1, 3}), {y.shape()[0], T, hq * y.shape()[3]});
  return {v(y), v(present_k), v(present_v)};
}

}  // namespace

namespace {

// RotaryEmbedding (opset 23): input [B, H, S, D] or [B, S, H*D]
// (num_heads); the first rotary_embedding_dim (default D) of each head
// rotated by the cos and sin of its position (the caches indexed by
// position_ids, or given per [B, S]), as pairs of halves or, interleaved,
// of even and odd elements; the rest as it was.
R rotary_embedding(Ctx& c) {
  Tensor x = c.in(0);
  const bool three_d = x.rank() == 3;
  if (x.rank() != 3 && x.rank() != 4) c.fail("the input must be [B, H, S, D] or [B, S, H*D]");
  Tensor t = three_d ? x : permute(x, {0, 2, 1, 3});  // [B, S, H, D]
  if (three_d) {
    int64_t heads = c.attr_int("num_heads", 0);
    int64_t hidden = static_dim(c, x, 2, "RotaryEmbedding of a symbolic hidden size");
    if (heads < 1 || hidden % heads) c.fail("num_heads must divide the hidden size");
    t = reshape(t, {x.shape()[0], x.shape()[1], Dim(heads), Dim(hidden / heads)});
  }
  int64_t d = static_dim(c, t, 3, "RotaryEmbedding of a symbolic head size");
  int64_t rot = c.attr_int("rotary_embedding_dim", 0);
  if (rot == 0) rot = d;
  if (rot < 2 || rot > d || rot % 2) c.fail("rotary_embedding_dim must be even and at most the head size");
  Tensor cos_ = c.in(1), sin_ = c.in(2);
  if (c.has_input(3)) {
    Tensor pos = cast(c.in(3), DType::i64);
    cos_ = gather(cos_, pos, 0), sin_ = gather(sin_, pos, 0);  // [B, S, D/2]
  }
  cos_ = unsqueeze(slice(cos_, 2, Dim(0), Dim(rot / 2)), {2}), sin_ = unsqueeze(slice(sin_, 2, Dim(0), Dim(rot / 2)), {2});
  Tensor xr = slice(t, 3, Dim(0), Dim(rot));
  const bool interleaved = c.attr_int("interleaved", 0) != 0;
  Tensor x1 = interleaved ? slice(xr, 3, Dim(0), Dim(rot), 2) : slice(xr, 3, Dim(0), Dim(rot / 2));
  Tensor x2 = interleaved ? slice(xr, 3, Dim(1), Dim(rot), 2) : slice(xr, 3, Dim(rot / 2), Dim(rot));
  Tensor real = cos_ * x1 - sin_ * x2, imag = sin_ * x1 + cos_ * x2;
  Tensor rotated = interleaved ? reshape(concat({unsqueeze(real, {4}), unsqueeze(imag, {4})}, 4), xr.shape()) : concat({real, imag}, 3);
  Tensor out = rot == d ? rotated : concat({rotated, slice(t, 3, Dim(rot), Dim(d))}, 3);
  return {v(three_d ? reshape(out, x.shape()) : permute(out, {0, 2, 1, 3}))};
}

// AffineGrid: theta [N, 2, 3] (or [N, 3, 4]) applied to the normalized
// coordinates of every position of size [N, C, H, W] (or [N, C, D, H, W]):
// [N, H, W, 2] (x first). Coordinates span [-1, 1] from pixel centre to
// centre with align_corners, else from edge to edge.
R affine_grid(Ctx& c) {
  Tensor theta = c.in(0);
  std::vector<int64_t> size = c.known_ints(1, "the size");
  const bool align = c.attr_int("align_corners", 0) != 0;
  size_t k = size.size() - 2;  // spatial dims
  if ((k != 2 && k != 3) || theta.rank() != 3) c.fail("size must be [N, C, H, W] or [N, C, D, H, W] and theta [N, k, k+1]");
  std::vector<int64_t> sp(size.begin() + 2, size.end());
  int64_t positions = 1;
  for (int64_t s : sp) {
    if (s < 1 || s > (int64_t{1} << 24) || positions * s > (int64_t{1} << 24)) c.fail("an output of more than 2^24 positions (or an empty one)");
    positions *= s;
  }
  // Base grid [positions, k + 1]: (x, y[, z], 1), x along the last dim.
  NDArray base(theta.dtype() == DType::f64 ? DType::f64 : DType::f32, {positions, static_cast<int64_t>(k) + 1});
  for (int64_t p = 0; p < positions; ++p) {
    int64_t rest = p;
    std::vector<int64_t> coord(k);
    for (size_t d = k; d-- > 0;) coord[d] = rest % sp[d], rest /= sp[d];
    for (size_t d = 0; d < k; ++d) {
      double n = static_cast<double>(sp[d]), i = static_cast<double>(coord[d]);
      double v = align ? (n > 1 ? -1 + 2 * i / (n - 1) : 0) : (2 * i + 1) / n - 1;
      base.set(p * static_cast<int64_t>(k + 1) + static_cast<int64_t>(k - 1 - d), v);  // x is the last spatial dim
    }
    base.set(p * static_cast<int64_t>(k + 1) + static_cast<int64_t>(k), 1);
  }
  Tensor b = c.tracer.constant(base);
  if (b.dtype() != theta.dtype()) b = cast(b, theta.dtype());
  Tensor grid = matmul(b, transpose(theta, 1, 2));  // [N, positions, k]
  Shape out{theta.shape()[0]};
  for (int64_t s : sp) out.push_back(Dim(s));
  out.push_back(Dim(static_cast<int64_t>(k)));
  return {v(reshape(grid, out))};
}

}  // namespace

void add_attention_ops(ConverterTable& t) {
  t.insert({{"Attention", attention_}, {"RotaryEmbedding", rotary_embedding}, {"AffineGrid", affine_grid}});
}

}  // namespace tj::onnx_import
