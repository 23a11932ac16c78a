// Op rows of flash attention's backward (FlashAttention-2's, split in three
// kernels), which flash_attn's derivative rule (special.cpp) emits for long
// sequences: the scores are recomputed a block of keys at a time from q and
// k, never held whole. With s_ij = scale q_i.k_j (+ bias_ij) over the keys
// row i sees (causal: j <= offset + i; the query heads of each KV head share
// its keys, as in flash_attn):
//
//   attn_lse(q, k, [offset], [bias])   lse_i = log sum_j exp(s_ij)          [B, H, T]
//   attn_dq(q, k, v, dout, lse, delta, [offset], [bias])                    [B, H, T, D]
//       dq_i = scale sum_j p_ij (dout_i.v_j - delta_i) k_j
//   attn_dkv(the same operands)                                             [B, Hkv, S, D + Dv]
//       dk_j = scale sum_i p_ij (dout_i.v_j - delta_i) q_i, then
//       dv_j = sum_i p_ij dout_i (i over the rows of every query head of j's
//       KV head)
//
// where p_ij = exp(s_ij - lse_i) and delta_i = dout_i.o_i (the forward's
// output; the rule computes it). A row with no visible key (lse -inf) has p
// 0 with zero_empty_rows, else NaN, as flash_attn's forward gives. Their
// attributes are flash_attn's. Interpreter kernels:
// src/reference/kernels.cpp; C++: codegen/cpp/kernels/attention_grad.cpp.
#include <algorithm>

#include "ir/ops/infer.h"
#include "ir/ops/rows.h"

namespace tj::rows {

namespace {

using AK = AttrKind;
using Cat = OpCategory;

// flash_attn's checks of q, k, v and the optional operands: `extra` is where
// the optional ones start.
Type check_as_flash_attn(InferCtx& c, const Type& v, size_t extra) {
  std::vector<Type> in = {c.in[0], c.in[1], v};
  in.insert(in.end(), c.in.begin() + static_cast<std::ptrdiff_t>(extra), c.in.end());
  const OpDef& fa = op_def(Op::flash_attn);
  InferCtx sub{fa, in, c.attrs};
  return fa.infer(sub);
}

Type infer_attn_lse(InferCtx& c) {
  Type o = check_as_flash_attn(c, c.in[1], 2);
  o.shape.pop_back();
  return o;
}

// q, k, v, dout, lse, delta, [offset], [bias].
Type check_grad_operands(InferCtx& c) {
  Type o = check_as_flash_attn(c, c.in[2], 6);
  Shape rows(o.shape.begin(), o.shape.end() - 1);
  if (c.in[3] != o) c.fail("dout must be the output's type " + o.str() + ", got " + c.in[3].str());
  for (size_t i : {4, 5})
    if (c.in[i] != Type{o.dtype, rows})
      c.fail(std::string(i == 4 ? "lse" : "delta") + " must be " + Type{o.dtype, rows}.str() + ", got " + c.in[i].str());
  return o;
}

Type infer_attn_dq(InferCtx& c) {
  check_grad_operands(c);
  return c.in[0];
}

Type infer_attn_dkv(InferCtx& c) {
  check_grad_operands(c);
  const Shape &k = c.in[1].shape, &v = c.in[2].shape;
  return {c.in[1].dtype, {k[0], k[1], k[2], k[3] + v[3]}};
}

// Visible (query, key) pairs per head, as flash_attn_flops counts them.
int64_t pairs(const CostArgs& a, int64_t T, int64_t S) {
  bool causal = a.k[1] != 0;
  return causal ? T * std::max<int64_t>(S - T, 0) + T * (T + 1) / 2 : T * S;
}

int64_t attn_lse_flops(const CostArgs& a) {
  int64_t B = a.in[0][0], H = a.in[0][1], T = a.in[0][2], D = a.in[0][3], S = a.in[1][2];
  return B * H * pairs(a, T, S) * (2 * D + 4);
}

// Scores, dout.v, and the one product each kernel accumulates (dq) or two (dk, dv).
int64_t attn_dq_flops(const CostArgs& a) {
  int64_t B = a.in[0][0], H = a.in[0][1], T = a.in[0][2], D = a.in[0][3], S = a.in[1][2], Dv = a.in[2][3];
  return B * H * pairs(a, T, S) * (4 * D + 2 * Dv + 6);
}

int64_t attn_dkv_flops(const CostArgs& a) {
  int64_t B = a.in[0][0], H = a.in[0][1], T = a.in[0][2], D = a.in[0][3], S = a.in[1][2], Dv = a.in[2][3];
  return B * H * pairs(a, T, S) * (4 * D + 4 * Dv + 6);
}

std::vector<AttrSpec> flash_attrs() {
  return {{"scale", AK::Float, std::nullopt},
          {"causal", AK::Bool, AttrValue(false)},
          {"bias", AK::Bool, AttrValue(false)},
          {"zero_empty_rows", AK::Bool, AttrValue(false)}};
}

}  // namespace

std::vector<OpDef> attention_grad() {
  return {
      {.op = Op::attn_lse, .name = "attn_lse", .category = Cat::special, .min_inputs = 2, .max_inputs = 4,
       .attrs = flash_attrs(), .infer = infer_attn_lse,
       .fuse = Fuse::attention, .flops_fn = attn_lse_flops},
      {.op = Op::attn_dq, .name = "attn_dq", .category = Cat::special, .min_inputs = 6, .max_inputs = 8,
       .attrs = flash_attrs(), .infer = infer_attn_dq,
       .fuse = Fuse::attention, .flops_fn = attn_dq_flops},
      {.op = Op::attn_dkv, .name = "attn_dkv", .category = Cat::special, .min_inputs = 6, .max_inputs = 8,
       .attrs = flash_attrs(), .infer = infer_attn_dkv,
       .fuse = Fuse::attention, .flops_fn = attn_dkv_flops},
  };
}

}  // namespace tj::rows
