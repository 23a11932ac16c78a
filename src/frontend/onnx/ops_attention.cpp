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

void add_attention_ops(ConverterTable& t) { t.insert({{"Attention", attention_}}); }

}  // namespace tj::onnx_import
