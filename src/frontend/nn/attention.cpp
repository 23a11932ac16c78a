// Scaled dot-product attention (tensorjit/nn.h) as the IR's flash
// attention ops: the forward (flash_attn), each row's log-sum-exp
// (attn_lse) and FlashAttention-2's backward (attn_dq, attn_dkv), with a
// mask or bias of any rank that broadcasts to the scores.
#include <cmath>

#include "frontend/emit.h"
#include "frontend/nn/common.h"

namespace tj {

using namespace nn_detail;

namespace {

struct Prepared {
  std::vector<Tensor> extra;  // offset (causal), bias
  NamedAttrs attrs;
};

// The optional operands and attributes the ops share.
Prepared prepare(const Tensor& q, const Tensor& k, const AttentionOptions& o) {
  const char* op = "attention";
  if (q.rank() != 4 || k.rank() != 4) fail(op, "q and k must be [B, H, T, D] and [B, Hkv, S, D], got " + q.type().str() + " and " + k.type().str());
  double scale = o.scale;
  if (scale == 0) {
    int64_t d = static_dim(op, q, 3);
    scale = 1.0 / std::sqrt(static_cast<double>(d));
  }
  Prepared p;
  p.attrs = {{"scale", scale}, {"causal", o.causal}, {"bias", o.bias.defined()}, {"zero_empty_rows", o.zero_empty_rows}};
  if (o.causal) p.extra.push_back(q.tracer()->scalar(static_cast<double>(o.causal_offset), DType::i64));
  if (o.bias.defined()) {
    Tensor b = o.bias;
    if (b.rank() > 4) fail(op, "a mask or bias of rank " + std::to_string(b.rank()) + " (at most 4)");
    if (b.dtype() == DType::boolean) b = where(b, q.tracer()->scalar(0, q.dtype()), q.tracer()->scalar(-INFINITY, q.dtype()));
    else if (b.dtype() != q.dtype()) b = cast(b, q.dtype());
    if (b.rank() < 4) {
      std::vector<int64_t> lead;
      for (int64_t i = 0; i < 4 - b.rank(); ++i) lead.push_back(i);
      b = unsqueeze(b, lead);
    }
    p.extra.push_back(b);
  }
  return p;
}

std::vector<Tensor> with(std::vector<Tensor> head, const std::vector<Tensor>& extra) {
  head.insert(head.end(), extra.begin(), extra.end());
  return head;
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  Prepared p = prepare(q, k, o);
  return emit(*q.tracer(), Op::flash_attn, with({q, k, v}, p.extra), p.attrs);
}

Tensor attention_lse(const Tensor& q, const Tensor& k, const AttentionOptions& o) {
  Prepared p = prepare(q, k, o);
  return emit(*q.tracer(), Op::attn_lse, with({q, k}, p.extra), p.attrs);
}

// delta_i = dout_i . out_i; dk and dv come out of one op, side by side.
AttentionGrads attention_grad(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& dout, const Tensor& lse,
                              const AttentionOptions& o) {
  Prepared p = prepare(q, k, o);
  Tensor delta = sum(dout * out, {3});
  std::vector<Tensor> ops = with({q, k, v, dout, lse, delta}, p.extra);
  Tensor dq = emit(*q.tracer(), Op::attn_dq, ops, p.attrs);
  Tensor dkv = emit(*q.tracer(), Op::attn_dkv, ops, p.attrs);
  const Dim d = k.shape()[3], dv = v.shape()[3];
  return {dq, slice(dkv, 3, Dim(0), d), slice(dkv, 3, d, d + dv)};
}

}  // namespace tj
