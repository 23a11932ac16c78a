// Op rows with semantics of their own: the causal mask generator, the
// in-place cache write, fused attention, and structured control flow (ops
// with regions). Their interpreter kernels are in
// src/reference/kernels.cpp (control flow: the interpreter's driver).
#include <algorithm>
#include <cmath>
#include <optional>

#include "ir/differ.h"
#include "ir/factors.h"
#include "ir/ops/infer.h"
#include "ir/ops/rows.h"

namespace tj::rows {

namespace {

using AK = AttrKind;
using Cat = OpCategory;

Type infer_causal_mask(InferCtx& c) {
  infer::require_int_scalar(c, 0, "causal_mask offset");
  DType t = c.attr<DType>("dtype");
  if (!is_float(t)) c.fail("causal_mask dtype must be floating point");
  return {t, {c.attr<Dim>("q"), c.attr<Dim>("k")}};
}

Type infer_kv_write(InferCtx& c) {
  if (c.in[0].dtype != c.in[1].dtype) c.fail("cache and new rows differ in dtype");
  infer::require_int_scalar(c, 2, "kv_write position");
  int r = c.rank(0);
  auto& axis = c.attr<int64_t>("axis");
  axis = c.axis(axis, r);
  if (c.rank(1) != r) c.fail("new rows must have the cache's rank");
  for (int d = 0; d < r; ++d) {
    if (d == axis) continue;
    if (c.in[0].shape[static_cast<size_t>(d)] != c.in[1].shape[static_cast<size_t>(d)])
      c.fail("new rows " + c.in[1].str() + " do not match cache " + c.in[0].str() + " outside axis " + std::to_string(axis));
  }
  return c.in[0];
}

// A region's inputs must take `types` in order.
void check_region_inputs(const InferCtx& c, const Graph& r, const char* what, const std::vector<Type>& types) {
  auto ins = r.inputs();
  if (ins.size() != types.size() || !r.params().empty())
    c.fail(std::string(what) + " region @" + r.name() + " takes " + std::to_string(ins.size()) + " inputs (and no params), the op passes " +
           std::to_string(types.size()));
  for (size_t i = 0; i < ins.size(); ++i)
    if (r.type(ins[i]) != types[i])
      c.fail(std::string(what) + " region @" + r.name() + " input " + std::to_string(i) + " is " + r.type(ins[i]).str() + ", the op passes " +
             types[i].str());
}

bool is_scalar_predicate(const Type& t) { return t.rank() == 0 || numel(t.shape) == Dim(1); }

// while_loop(s0..s{n-1}, c0..): `cond` maps all operands to a scalar, `body`
// maps them to the next n carried values (same types); the result is the
// final carried state (result 0 is the op's value).
Type infer_while_loop(InferCtx& c) {
  int64_t n = c.attr<int64_t>("carried");
  if (n < 1 || n > static_cast<int64_t>(c.in.size())) c.fail("carried must be in [1, operands], got " + std::to_string(n));
  const Graph& cond = *c.attr<Region>("cond");
  const Graph& body = *c.attr<Region>("body");
  check_region_inputs(c, cond, "cond", c.in);
  check_region_inputs(c, body, "body", c.in);
  if (cond.outputs().size() != 1 || !is_scalar_predicate(cond.type(cond.outputs()[0])))
    c.fail("cond region @" + cond.name() + " must return one scalar");
  if (static_cast<int64_t>(body.outputs().size()) != n) c.fail("body region @" + body.name() + " must return the " + std::to_string(n) + " carried values");
  for (int64_t i = 0; i < n; ++i)
    if (body.type(body.outputs()[static_cast<size_t>(i)]) != c.in[static_cast<size_t>(i)])
      c.fail("body result " + std::to_string(i) + " is " + body.type(body.outputs()[static_cast<size_t>(i)]).str() + ", carried " +
             c.in[static_cast<size_t>(i)].str());
  return c.in[0];
}

// cond(pred, a0..): the `then` or `else` region applied to a0..; both return
// the same types; the result is their first output (more through `result`).
Type infer_cond(InferCtx& c) {
  if (!is_scalar_predicate(c.in[0])) c.fail("cond predicate must be a scalar, got " + c.in[0].str());
  std::vector<Type> args(c.in.begin() + 1, c.in.end());
  const Graph& t = *c.attr<Region>("then");
  const Graph& e = *c.attr<Region>("else");
  check_region_inputs(c, t, "then", args);
  check_region_inputs(c, e, "else", args);
  if (t.outputs().empty() || t.outputs().size() != e.outputs().size()) c.fail("then and else must return the same number of values (at least one)");
  for (size_t i = 0; i < t.outputs().size(); ++i)
    if (t.type(t.outputs()[i]) != e.type(e.outputs()[i]))
      c.fail("then and else result " + std::to_string(i) + " differ: " + t.type(t.outputs()[i]).str() + " vs " + e.type(e.outputs()[i]).str());
  return t.type(t.outputs()[0]);
}

// Its type depends on the producer, which inference does not see: Graph
// computes it (result_type); here only the index is checked.
Type infer_result(InferCtx& c) {
  if (c.attr<int64_t>("index") < 1) c.fail("result index must be at least 1 (result 0 is the op's own value)");
  c.fail("result: the type comes from its producer (Graph::add)");
}

Type infer_flash_attn(InferCtx& c) {
  const Type& q = c.in[0];
  const Type& k = c.in[1];
  const Type& v = c.in[2];
  infer::require_float(c, 0);
  if (k.dtype != q.dtype || v.dtype != q.dtype) c.fail("q, k, v dtypes differ");
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4) c.fail("q, k, v must be [batch, heads, len, head_dim]");
  if (q.shape[0] != k.shape[0] || k.shape[0] != v.shape[0]) c.fail("batch sizes differ");
  if (k.shape[1] != v.shape[1] || k.shape[2] != v.shape[2]) c.fail("k and v differ in heads or length");
  if (q.shape[3] != k.shape[3]) c.fail("q and k head dims differ: " + q.shape[3].str() + " vs " + k.shape[3].str());
  if (!q.shape[1].div_exact(k.shape[1])) c.fail("query heads " + q.shape[1].str() + " not a multiple of kv heads " + k.shape[1].str());
  bool causal = c.attr<bool>("causal"), bias = c.attr<bool>("bias");
  if (c.in.size() != 3 + size_t{causal} + size_t{bias})
    c.fail("flash_attn takes q, k, v, then an offset operand exactly when causal and a bias operand exactly when bias");
  if (causal) infer::require_int_scalar(c, 3, "flash_attn offset");
  Shape out = {q.shape[0], q.shape[1], q.shape[2], v.shape[3]};
  if (bias) {
    // Added to the scaled scores [batch, heads, queries, keys]: each dim that
    // size or 1 (broadcast).
    const Type& b = c.in.back();
    Shape scores = {q.shape[0], q.shape[1], q.shape[2], k.shape[2]};
    if (b.dtype != q.dtype) c.fail("flash_attn bias dtype " + std::string(dtype_name(b.dtype)) + " is not q's");
    if (b.rank() != 4) c.fail("flash_attn bias must have rank 4, got " + b.str());
    for (size_t i = 0; i < 4; ++i)
      if (b.shape[i] != Dim(1) && b.shape[i] != scores[i])
        c.fail("flash_attn bias " + b.str() + " does not broadcast to the scores " + shape_str(scores));
  }
  return {q.dtype, out};
}

// Two matmuls plus the online softmax over the (query, key) pairs; causal:
// assume a full cache (the query block ends at the last key).
int64_t flash_attn_flops(const CostArgs& a) {
  int64_t B = a.in[0][0], H = a.in[0][1], T = a.in[0][2], D = a.in[0][3];
  int64_t S = a.in[1][2], Dv = a.out[3];
  bool causal = a.k[1] != 0, bias = a.k[2] != 0;
  int64_t pairs = causal ? T * std::max<int64_t>(S - T, 0) + T * (T + 1) / 2 : T * S;
  return 2 * B * H * pairs * (D + Dv) + (bias ? 6 : 5) * B * H * pairs;
}

// kv_write (ir/differ.h): the cache's cotangent outside the written window,
// and the rows' is the window's, read back with a gather.
void d_kv_write(Differ& d) {
  int64_t axis = d.n.attr_int("axis");
  const Type cache = d.type(d.x(0)), rows = d.type(d.x(1));
  ValueId pos = d.x(2);
  DType it = d.type(pos).dtype;
  const Dim len = rows.shape[static_cast<size_t>(axis)];
  if (d.wants(1)) {
    ValueId at = d.add(d.op(Op::iota, {}, {{"n", len}, {"dtype", it}}), pos);
    if (d.type(at).rank() != 1) at = d.op(Op::reshape, {at}, {{"shape", Shape{len}}});
    d.give(1, d.op(Op::gather, {d.dy, at}, {{"axis", axis}}));
  }
  if (d.wants(0)) {
    Shape along(cache.shape.size(), Dim(1));
    along[static_cast<size_t>(axis)] = cache.shape[static_cast<size_t>(axis)];
    ValueId p = d.op(Op::reshape, {d.op(Op::iota, {}, {{"n", along[static_cast<size_t>(axis)]}, {"dtype", it}})}, {{"shape", along}});
    ValueId scalar_pos = d.type(pos).rank() == 0 ? pos : d.op(Op::reshape, {pos}, {{"shape", Shape{}}});
    ValueId inside = d.op(Op::logical_and, {d.op(Op::ge, {p, scalar_pos}), d.op(Op::lt, {p, d.add(scalar_pos, d.size(len, it))})});
    d.give(0, d.keep(d.op(Op::logical_not, {inside}), d.dy));
  }
}

// The scores' elements up to which flash_attn's backward holds them whole
// (products on the matrix library beat the row kernels there); past this, or
// when a size is symbolic, it recomputes them a block of keys at a time.
constexpr int64_t kWholeScores = int64_t{1} << 20;

// flash_attn's backward without the score matrix (ops/attention_grad.cpp):
// each row's log-sum-exp, delta = rowsum(dO * O), then dQ and [dK | dV],
// which recompute the scores as they go.
void d_flash_attn_blocked(Differ& d) {
  NamedAttrs attrs = {{"scale", d.n.attr_float("scale")},
                      {"causal", d.n.attr_bool("causal")},
                      {"bias", d.n.attr_bool("bias")},
                      {"zero_empty_rows", d.n.attr_bool("zero_empty_rows")}};
  std::vector<ValueId> optional(d.n.inputs.begin() + 3, d.n.inputs.end());  // offset, bias
  std::vector<ValueId> lse_in = {d.x(0), d.x(1)};
  lse_in.insert(lse_in.end(), optional.begin(), optional.end());
  ValueId lse = d.op(Op::attn_lse, lse_in, attrs);
  ValueId delta = d.op(Op::reshape, {d.reduce(Op::sum, d.mul(d.dy, d.y), {3})}, {{"shape", d.type(lse).shape}});
  std::vector<ValueId> in = {d.x(0), d.x(1), d.x(2), d.dy, lse, delta};
  in.insert(in.end(), optional.begin(), optional.end());
  if (d.wants(0)) d.give(0, d.op(Op::attn_dq, in, attrs));
  if (!d.wants(1) && !d.wants(2)) return;
  ValueId kv = d.op(Op::attn_dkv, in, attrs);  // [B, Hkv, S, D + Dv]
  const Dim D = d.type(d.x(1)).shape[3], Dv = d.type(d.x(2)).shape[3];
  auto part = [&](const Dim& from, const Dim& to) { return d.op(Op::slice, {kv}, {{"axis", int64_t{3}}, {"start", from}, {"end", to}}); };
  if (d.wants(1)) d.give(1, part(0, D));
  if (d.wants(2)) d.give(2, part(D, D + Dv));
}

// flash_attn: the scores recomputed, as the forward's online softmax
// computes them, with the query heads of each KV head side by side
// ([B, Hkv, G*T, S]: head h is group h / G, as the kernel reads it). Then
// dV = P^T dO (summed over the group by the product), dP = dO V^T,
// dS = P (dP - rowsum(dP P)), dQ = scale dS K, dK = scale dS^T Q, and the
// bias' dS. That holds the [G*T, S] scores of each KV head: for up to
// kWholeScores of them in all, or when the bias' gradient (the size of the
// scores itself) is wanted. Otherwise d_flash_attn_blocked.
void d_flash_attn(Differ& d) {
  const Type q = d.type(d.x(0)), k = d.type(d.x(1)), v = d.type(d.x(2));
  const bool causal = d.n.attr_bool("causal"), has_bias = d.n.attr_bool("bias");
  const double scale = d.n.attr_float("scale");
  const Dim B = q.shape[0], H = q.shape[1], T = q.shape[2], D = q.shape[3], Hkv = k.shape[1], S = k.shape[2], Dv = v.shape[3];
  const std::optional<int64_t> scores = numel_const(Shape{B, H, T, S});
  const bool bias_grad = has_bias && d.wants(d.n.inputs.size() - 1);
  if (!bias_grad && (!scores || *scores > kWholeScores))
    return d_flash_attn_blocked(d);
  const std::optional<Dim> G = H.div_exact(Hkv);
  if (!G) throw Unsupported("flash_attn: query heads " + H.str() + " not a known multiple of kv heads " + Hkv.str());
  const Dim R = *G * T;  // rows per KV head
  auto rows = [&](ValueId x, const Dim& last) { return d.op(Op::reshape, {x}, {{"shape", Shape{B, Hkv, R, last}}}); };
  auto swap = [&](ValueId x) { return d.op(Op::permute, {x}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}}); };
  ValueId qg = rows(d.x(0), D), K = d.x(1), V = d.x(2);
  ValueId s = d.mul(d.op(Op::matmul, {qg, swap(K)}), d.c(scale));
  if (has_bias) s = d.add(s, rows(d.expand_to(d.x(d.n.inputs.size() - 1), {B, H, T, S}), S));
  // Key j is visible to the query at position i of its block when j <= offset + i.
  ValueId visible = -1;
  if (causal) {
    DType it = d.type(d.x(3)).dtype;
    ValueId i = d.op(Op::reshape, {d.op(Op::iota, {}, {{"n", T}, {"dtype", it}})}, {{"shape", Shape{Dim(1), T}}});
    i = d.op(Op::reshape, {d.expand_to(i, {*G, T})}, {{"shape", Shape{R, Dim(1)}}});
    ValueId j = d.op(Op::reshape, {d.op(Op::iota, {}, {{"n", S}, {"dtype", it}})}, {{"shape", Shape{Dim(1), S}}});
    ValueId offset = d.type(d.x(3)).rank() == 0 ? d.x(3) : d.op(Op::reshape, {d.x(3)}, {{"shape", Shape{}}});
    visible = d.op(Op::le, {j, d.add(i, offset)});
    s = d.op(Op::where, {visible, s, d.c(-INFINITY)});
  }
  ValueId m = d.reduce(Op::amax, s, {3});
  ValueId e = d.op(Op::exp, {d.sub(s, m)});
  if (causal) e = d.keep(visible, e);  // an empty row: 0, not exp(NaN)
  ValueId p = d.div(e, d.reduce(Op::sum, e, {3}));
  if (d.n.attr_bool("zero_empty_rows")) p = d.keep(d.op(Op::eq, {p, p}), p);  // NaN (0 / 0) rows: 0
  ValueId dO = rows(d.dy, Dv);
  if (d.wants(2)) d.give(2, d.op(Op::matmul, {swap(p), dO}));
  ValueId dp = d.op(Op::matmul, {dO, swap(V)});
  ValueId ds = d.mul(p, d.sub(dp, d.reduce(Op::sum, d.mul(dp, p), {3})));
  if (d.wants(0)) d.give(0, d.op(Op::reshape, {d.mul(d.op(Op::matmul, {ds, K}), d.c(scale))}, {{"shape", q.shape}}));
  if (d.wants(1)) d.give(1, d.mul(d.op(Op::matmul, {swap(ds), qg}), d.c(scale)));
  if (has_bias && d.wants(d.n.inputs.size() - 1))
    d.give(d.n.inputs.size() - 1, d.op(Op::reshape, {ds}, {{"shape", Shape{B, H, T, S}}}));
}

// cond: a cond of the branches' backwards, on the same predicate and
// operands and the cotangent. One result only (a cond whose other results
// are read is not differentiable here).
void d_cond(Differ& d) {
  if (num_results(d.n) != 1) throw Unsupported("cond with " + std::to_string(num_results(d.n)) + " results is not differentiable here (one is)");
  std::vector<size_t> wanted, region_inputs;  // operands (after the predicate), and their places among the regions' inputs
  for (size_t i = 1; i < d.n.inputs.size(); ++i)
    if (d.wants(i)) wanted.push_back(i), region_inputs.push_back(i - 1);
  if (wanted.empty()) return;
  Region then_grad = d.region_grad(*std::get<Region>(d.n.attr("then")), region_inputs);
  Region else_grad = d.region_grad(*std::get<Region>(d.n.attr("else")), region_inputs);
  std::vector<ValueId> ops(d.n.inputs.begin(), d.n.inputs.end());
  ops.push_back(d.dy);
  ValueId c = d.op(Op::cond, ops, {{"then", then_grad}, {"else", else_grad}});
  for (size_t k = 0; k < wanted.size(); ++k)
    d.give(wanted[k], k == 0 ? c : d.op(Op::result, {c}, {{"index", static_cast<int64_t>(k)}}));
}

}  // namespace

std::vector<OpDef> special() {
  return {
      {.op = Op::causal_mask, .name = "causal_mask", .category = Cat::special, .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"q", AK::DimK, std::nullopt}, {"k", AK::DimK, std::nullopt}, {"dtype", AK::DTypeK, AttrValue(DType::f32)}},
       .infer = infer_causal_mask,
       .fuse = Fuse::generator, .flops = 0},
      {.op = Op::kv_write, .name = "kv_write", .category = Cat::special, .min_inputs = 3, .max_inputs = 3,
       .attrs = {{"axis", AK::Int, AttrValue(int64_t{2})}}, .infer = infer_kv_write,
       .fuse = Fuse::store, .flops = 0, .grad = d_kv_write, .factors = axis_factors},
      // Operands q, k, v, [offset if causal], [bias if bias]; zero_empty_rows:
      // a row with no visible key (every score -inf) gives 0, not NaN.
      {.op = Op::flash_attn, .name = "flash_attn", .category = Cat::special, .min_inputs = 3, .max_inputs = 5,
       .attrs = {{"scale", AK::Float, std::nullopt},
                 {"causal", AK::Bool, AttrValue(false)},
                 {"bias", AK::Bool, AttrValue(false)},
                 {"zero_empty_rows", AK::Bool, AttrValue(false)}},
       .infer = infer_flash_attn,
       .fuse = Fuse::attention, .flops_fn = flash_attn_flops, .grad = d_flash_attn},

      {.op = Op::while_loop, .name = "while_loop", .category = Cat::control, .min_inputs = 1, .max_inputs = -1,
       .attrs = {{"carried", AK::Int, std::nullopt}, {"cond", AK::RegionK, std::nullopt}, {"body", AK::RegionK, std::nullopt}},
       .infer = infer_while_loop},
      {.op = Op::cond, .name = "cond", .category = Cat::control, .min_inputs = 1, .max_inputs = -1,
       .attrs = {{"then", AK::RegionK, std::nullopt}, {"else", AK::RegionK, std::nullopt}}, .infer = infer_cond,
       .grad = d_cond},
      {.op = Op::result, .name = "result", .category = Cat::control, .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"index", AK::Int, std::nullopt}}, .infer = infer_result},
  };
}

}  // namespace tj::rows
