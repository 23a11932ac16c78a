// match_attention: recognizes scaled dot-product attention and replaces it by
// one flash_attn node:
//
//   s = matmul(q, permute(K, [..,-1,-2]))       q [B,Hq,T,D], K [B,Hq,S,D]
//   s = s * c  |  c * s  |  s / c                (optional scalar scale)
//   s = s + causal_mask(offset){q=T, k=S}         (optional, either side)
//   o = matmul(softmax(s, last axis), V)          V [B,Hq,S,Dv]
//
// where K and V may be grouped-query expansions of [B,Hkv,S,D] caches:
// reshape(expand(reshape-or-unsqueeze(k) to [B,Hkv,1,S,D], [B,Hkv,G,S,D]),
// [B,Hq,S,D]), as in the decode form reading a KV cache.
// Must run before decompose: once softmax is decomposed there is nothing to
// match. flash_attn applies the scale inside the dot product: about 1 ulp.
#include <optional>

#include "passes/passes.h"
#include "passes/rewriter.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

struct Attention {
  ValueId q, k, v, offset = -1;
  double scale = 1.0;
};

// The scalar value of a splat constant with all dims 1, if `v` is one.
std::optional<double> scalar_const(const Graph& g, ValueId v) {
  const Node& n = g.node(v);
  if (n.op != Op::constant || n.const_data()->size() != 1) return std::nullopt;
  for (const Dim& d : n.type.shape)
    if (d != Dim(1)) return std::nullopt;
  return (*n.const_data())[0];
}

// Undoes the grouped-query expansion of `v` ([B,Hq,S,D]) if there is one,
// returning the [B,Hkv,S,D] tensor it came from; otherwise `v` itself.
ValueId unexpand_heads(const Graph& g, ValueId v) {
  const Node& r = g.node(v);
  if (r.op != Op::reshape) return v;
  const Node& e = g.node(r.inputs[0]);
  if (e.op != Op::expand || e.type.rank() != 5) return v;
  const Node& u = g.node(e.inputs[0]);
  if (u.op != Op::unsqueeze && u.op != Op::reshape) return v;
  ValueId base = u.inputs[0];
  const Shape& bs = g.type(base).shape;  // [B,Hkv,S,D]
  const Shape& us = u.type.shape;        // [B,Hkv,1,S,D]
  const Shape& es = e.type.shape;        // [B,Hkv,G,S,D]
  const Shape& rs = r.type.shape;        // [B,Hkv*G,S,D]
  if (bs.size() != 4 || us != Shape{bs[0], bs[1], 1, bs[2], bs[3]}) return v;
  if (es[0] != bs[0] || es[1] != bs[1] || es[3] != bs[2] || es[4] != bs[3]) return v;
  if (rs != Shape{bs[0], bs[1] * es[2], bs[2], bs[3]}) return v;
  return base;
}

std::optional<Attention> match(const Graph& g, ValueId out) {
  const Node& pv = g.node(out);
  if (pv.op != Op::matmul || pv.type.rank() != 4) return std::nullopt;
  const Node& sm = g.node(pv.inputs[0]);
  if (sm.op != Op::softmax || sm.attr_int("axis") != 3) return std::nullopt;
  Attention a;
  ValueId s = sm.inputs[0];

  // Optional causal mask.
  if (g.node(s).op == Op::add) {
    const Node& add = g.node(s);
    for (int side = 0; side < 2; ++side) {
      const Node& m = g.node(add.inputs[static_cast<size_t>(side)]);
      if (m.op != Op::causal_mask) continue;
      a.offset = m.inputs[0];
      s = add.inputs[static_cast<size_t>(1 - side)];
      const Shape& st = g.type(s).shape;
      if (m.attr_dim("q") != st[2] || m.attr_dim("k") != st[3] || g.type(s) != add.type) return std::nullopt;
      break;
    }
    if (a.offset < 0) return std::nullopt;
  }
  // Optional scale.
  const Node& sc = g.node(s);
  if (sc.op == Op::mul || sc.op == Op::div) {
    for (int side = 0; side < (sc.op == Op::mul ? 2 : 1); ++side) {
      int other = sc.op == Op::div ? 1 : 1 - side;
      auto c = scalar_const(g, sc.inputs[static_cast<size_t>(other)]);
      if (!c || g.type(sc.inputs[static_cast<size_t>(1 - other)]) != sc.type) continue;
      a.scale = sc.op == Op::mul ? *c : 1.0 / *c;
      s = sc.inputs[static_cast<size_t>(1 - other)];
      break;
    }
  }
  const Node& qk = g.node(s);
  if (qk.op != Op::matmul) return std::nullopt;
  const Node& kt = g.node(qk.inputs[1]);
  if (kt.op != Op::permute || kt.attr_ints("perm") != std::vector<int64_t>{0, 1, 3, 2}) return std::nullopt;
  a.q = qk.inputs[0];
  a.k = unexpand_heads(g, kt.inputs[0]);
  a.v = unexpand_heads(g, pv.inputs[1]);
  // flash_attn's own shape rules decide the rest (ranks, heads, head dims).
  const Type& qt = g.type(a.q);
  const Type& kt4 = g.type(a.k);
  const Type& vt = g.type(a.v);
  if (qt.rank() != 4 || kt4.rank() != 4 || vt.rank() != 4) return std::nullopt;
  if (qt.shape[0] != kt4.shape[0] || kt4.shape[1] != vt.shape[1] || kt4.shape[2] != vt.shape[2]) return std::nullopt;
  if (!qt.shape[1].div_exact(kt4.shape[1])) return std::nullopt;
  if (g.type(qk.inputs[0]).shape[2] != qk.type.shape[2]) return std::nullopt;
  // The replacement must have exactly the attention's type.
  std::vector<Type> types = {qt, kt4, vt};
  std::vector<AttrValue> attrs = {a.scale, a.offset >= 0};
  if (a.offset >= 0) types.push_back(g.type(a.offset));
  try {
    if (infer_type(Op::flash_attn, types, attrs) != pv.type) return std::nullopt;
  } catch (const Error&) {
    return std::nullopt;
  }
  return a;
}

}  // namespace

bool match_attention(Graph& g, const PassOptions&) {
  std::vector<std::optional<Attention>> found(g.size());
  bool any = false;
  for (size_t i = 0; i < g.size(); ++i) any |= (found[i] = match(g, static_cast<ValueId>(i))).has_value();
  if (!any) return false;
  Rewriter rw(g);
  g = rw.run([&](ValueId v) -> ValueId {
    const auto& a = found[static_cast<size_t>(v)];
    if (!a) return Rewriter::kCopy;
    Graph& out = rw.out();
    std::vector<ValueId> ins = {rw.map(a->q), rw.map(a->k), rw.map(a->v)};
    NamedAttrs attrs = {{"scale", a->scale}};
    if (a->offset >= 0) {
      ins.push_back(rw.map(a->offset));
      attrs.push_back({"causal", true});
    }
    return out.add(Op::flash_attn, ins, attrs);
  });
  return true;
}

}  // namespace tj
