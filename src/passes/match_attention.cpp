// match_attention: recognizes scaled dot-product attention and replaces it by
// one flash_attn node:
//
//   s = matmul(q', kt')         q' = q | q*c;  kt' = kt | kt*c;
//                               kt = permute(K, [..,-1,-2]) with K [B,Hq,S,D],
//                               or any permute whose last two axes swapped
//                               make K from its operand (K = permute(x, p)),
//                               or a chain of permutes and reshapes that only
//                               add or drop unit dims, which is one such
//                               permute (torch.export's ONNX: [1,H,S,D] ->
//                               [H,S,D] -> [H,D,S] -> [1,H,D,S])
//   s = s * c  |  c * s  |  s / c                (scalar scales, any number)
//   s = s + causal_mask(offset){q=T, k=S}         (optional, either side)
//   s = s + bias  |  where(M, -inf, s)            (optional: an additive bias
//                                                  broadcast to the scores, or
//                                                  a boolean mask, as torch's
//                                                  masked_fill exports it)
//   p = softmax(s, last axis)
//   p = where(p != p, 0, p)                       (optional: rows with no
//                                                  visible key give 0, as
//                                                  torch's exported SDPA does)
//   o = matmul(p, V)                              V [B,Hq,S,Dv]
//
// where K and V may be grouped-query expansions of [B,Hkv,S,D] caches:
// reshape(expand(x to [B,Hkv,G,S,D] with unit dims anywhere), [B,Hq,S,D])
// where x is [B,Hkv,S,D] with a unit dim before S (unsqueeze or reshape), as
// in the decode form reading a KV cache and in torch's repeat_interleave.
// Must run before decompose: once softmax is decomposed there is nothing to
// match. flash_attn applies the scale inside the dot product (about 1 ulp),
// and a masked score is s + (-inf), which differs from where(M, -inf, s) only
// where s is +inf or NaN.
#include <algorithm>
#include <limits>
#include <optional>

#include "ir/rewriter.h"
#include "passes/passes.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

struct Attention {
  ValueId q, k, v, offset = -1;
  std::vector<int64_t> k_perm;  // K = permute(k, k_perm) when not empty
  ValueId bias = -1;            // an additive bias, or
  ValueId mask = -1;            // a boolean mask: bias where(mask, -inf, 0)
  bool zero_empty = false;
  double scale = 1.0;
};

// The scalar value of a splat constant with all dims 1, if `v` is one.
std::optional<double> scalar_const(const Graph& g, ValueId v) {
  for (const Dim& d : g.type(v).shape)
    if (d != Dim(1)) return std::nullopt;
  return splat_value(g, v);
}

// The shape without its unit dims.
Shape without_ones(const Shape& s) {
  Shape r;
  for (const Dim& d : s)
    if (d != Dim(1)) r.push_back(d);
  return r;
}

// Undoes the grouped-query expansion of `v` ([B,Hq,S,D]) if there is one,
// returning the [B,Hkv,S,D] tensor it came from; otherwise `v` itself.
ValueId unexpand_heads(const Graph& g, ValueId v) {
  const Node& r = g.node(v);
  if (r.op != Op::reshape) return v;
  const Node& e = g.node(r.inputs[0]);
  if (e.op != Op::expand) return v;
  const Node& u = g.node(e.inputs[0]);
  if (u.op != Op::unsqueeze && u.op != Op::reshape) return v;
  ValueId base = u.inputs[0];
  const Shape& bs = g.type(base).shape;  // [B,Hkv,S,D]
  const Shape& us = u.type.shape;        // [B,Hkv,1,S,D] with unit dims anywhere
  const Shape& es = e.type.shape;        // [B,Hkv,G,S,D] likewise
  const Shape& rs = r.type.shape;        // [B,Hkv*G,S,D]
  if (bs.size() != 4 || us.size() != es.size()) return v;
  // The unsqueeze or reshape only adds unit dims; the expansion grows one.
  if (without_ones(us) != without_ones(bs)) return v;
  int grown = -1;
  for (size_t i = 0; i < us.size(); ++i) {
    if (us[i] == es[i]) continue;
    if (us[i] != Dim(1) || grown >= 0) return v;
    grown = static_cast<int>(i);
  }
  if (grown < 0) return v;
  // It sits between the heads and the keys: [B,Hkv] before it, [S,D] after.
  Shape before(us.begin(), us.begin() + grown), after(us.begin() + grown + 1, us.end());
  if (without_ones(before) != without_ones(Shape{bs[0], bs[1]}) || without_ones(after) != without_ones(Shape{bs[2], bs[3]})) return v;
  if (rs != Shape{bs[0], bs[1] * es[static_cast<size_t>(grown)], bs[2], bs[3]}) return v;
  return base;
}

// `v` as permute(x, perm) with x of rank 4, when `v` is a chain of permutes
// and of reshapes that only add or drop unit dims, with at least one permute.
std::optional<std::pair<ValueId, std::vector<int64_t>>> view_as_permute(const Graph& g, ValueId v) {
  const Shape& vs = g.type(v).shape;
  if (vs.size() != 4) return std::nullopt;
  // to[j]: the non-unit axis (by order among the non-unit axes) of the
  // current tensor that v's j-th non-unit axis is.
  auto non_unit = [](const Shape& s) {
    std::vector<size_t> r;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] != Dim(1)) r.push_back(i);
    return r;
  };
  std::vector<size_t> to(non_unit(vs).size());
  for (size_t j = 0; j < to.size(); ++j) to[j] = j;
  ValueId cur = v;
  bool permuted = false;
  for (;;) {
    const Node& n = g.node(cur);
    if (n.op == Op::reshape && without_ones(g.type(n.inputs[0]).shape) == without_ones(n.type.shape)) {
      cur = n.inputs[0];
      continue;
    }
    if (n.op != Op::permute) break;
    const Shape& ys = g.type(n.inputs[0]).shape;
    std::vector<int64_t> q = n.attr_ints("perm");
    std::vector<size_t> here = non_unit(n.type.shape), there = non_unit(ys);
    for (size_t& t : to) {
      size_t axis = static_cast<size_t>(q[here[t]]);  // an axis of the operand
      t = static_cast<size_t>(std::find(there.begin(), there.end(), axis) - there.begin());
    }
    cur = n.inputs[0];
    permuted = true;
  }
  const Shape& xs = g.type(cur).shape;
  if (!permuted || cur == v || xs.size() != 4) return std::nullopt;
  std::vector<size_t> x_non = non_unit(xs), v_non = non_unit(vs), x_unit;
  for (size_t i = 0; i < 4; ++i)
    if (xs[i] == Dim(1)) x_unit.push_back(i);
  std::vector<int64_t> perm(4);
  size_t next_unit = 0;
  for (size_t i = 0, j = 0; i < 4; ++i) {
    if (j < v_non.size() && v_non[j] == i) perm[i] = static_cast<int64_t>(x_non[to[j++]]);
    else perm[i] = static_cast<int64_t>(x_unit[next_unit++]);
  }
  return std::make_pair(cur, perm);
}

// Peels scalar scales off `v` (mul by a scalar constant on either side, div
// by one on the right), multiplying them into `scale`; each must keep the
// type.
ValueId peel_scales(const Graph& g, ValueId v, double& scale) {
  for (;;) {
    const Node& n = g.node(v);
    if (n.op != Op::mul && n.op != Op::div) return v;
    bool peeled = false;
    for (int side = 0; side < (n.op == Op::mul ? 2 : 1) && !peeled; ++side) {
      int other = n.op == Op::div ? 1 : 1 - side;
      auto c = scalar_const(g, n.inputs[static_cast<size_t>(other)]);
      ValueId x = n.inputs[static_cast<size_t>(1 - other)];
      if (!c || g.type(x) != n.type) continue;
      scale *= n.op == Op::mul ? *c : 1.0 / *c;
      v = x;
      peeled = true;
    }
    if (!peeled) return v;
  }
}

// The scores' product q @ kt under scalar scales, if `s` is one.
std::optional<ValueId> scores_product(const Graph& g, ValueId s, double& scale) {
  double c = 1.0;
  ValueId m = peel_scales(g, s, c);
  if (g.node(m).op != Op::matmul || g.type(m).rank() != 4) return std::nullopt;
  scale *= c;
  return m;
}

// Whether `b` (f32 like the scores, rank at most 4) broadcasts to `scores`
// without growing it.
bool broadcasts_to(const Type& b, const Type& scores) {
  if (b.dtype != scores.dtype || b.rank() > 4) return false;
  size_t lead = 4 - static_cast<size_t>(b.rank());
  for (size_t i = 0; i < b.shape.size(); ++i)
    if (b.shape[i] != Dim(1) && b.shape[i] != scores.shape[lead + i]) return false;
  return true;
}

std::optional<Attention> match(const Graph& g, ValueId out) {
  const Node& pv = g.node(out);
  if (pv.op != Op::matmul || pv.type.rank() != 4) return std::nullopt;
  Attention a;
  ValueId p = pv.inputs[0];
  // Optional guard: where(p != p, 0, p).
  if (const Node& w = g.node(p); w.op == Op::where) {
    const Node& c = g.node(w.inputs[0]);
    ValueId inner = w.inputs[2];
    if (c.op != Op::ne || c.inputs[0] != inner || c.inputs[1] != inner || !is_splat(g, w.inputs[1], 0.0)) return std::nullopt;
    if (w.type != g.type(inner)) return std::nullopt;
    a.zero_empty = true;
    p = inner;
  }
  const Node& sm = g.node(p);
  if (sm.op != Op::softmax || sm.attr_int("axis") != 3) return std::nullopt;
  ValueId s = sm.inputs[0];
  const Type& st = g.type(s);

  // Additive terms: a causal mask, a bias, a boolean mask, in any order.
  double scale = 1.0;
  std::optional<ValueId> qk;
  for (int terms = 0; terms < 3 && !(qk = scores_product(g, s, scale)); ++terms) {
    const Node& n = g.node(s);
    if (n.type != st) return std::nullopt;
    if (n.op == Op::where) {  // where(M, -inf, s)
      if (a.mask >= 0 || a.bias >= 0 || g.type(n.inputs[0]).dtype != DType::boolean) return std::nullopt;
      if (!is_splat(g, n.inputs[1], -std::numeric_limits<double>::infinity())) return std::nullopt;
      Type mt = g.type(n.inputs[0]);
      mt.dtype = st.dtype;
      if (!broadcasts_to(mt, st)) return std::nullopt;
      a.mask = n.inputs[0];
      s = n.inputs[2];
      continue;
    }
    if (n.op != Op::add) return std::nullopt;
    bool took = false;
    for (int side = 0; side < 2 && !took; ++side) {
      ValueId term = n.inputs[static_cast<size_t>(side)], rest = n.inputs[static_cast<size_t>(1 - side)];
      if (g.type(rest) != st) continue;
      const Node& m = g.node(term);
      if (m.op == Op::causal_mask) {
        if (a.offset >= 0 || m.attr_dim("q") != st.shape[2] || m.attr_dim("k") != st.shape[3]) continue;
        a.offset = m.inputs[0];
      } else {
        // A bias: anything that broadcasts, on the side that is not the scores.
        double ignored = 1.0;
        if (a.bias >= 0 || a.mask >= 0 || !broadcasts_to(g.type(term), st) || scores_product(g, term, ignored)) continue;
        a.bias = term;
      }
      s = rest;
      took = true;
    }
    if (!took) return std::nullopt;
  }
  if (!qk) return std::nullopt;
  const Node& prod = g.node(*qk);
  // Scalar scales on either operand.
  ValueId qv = peel_scales(g, prod.inputs[0], scale);
  ValueId ktv = peel_scales(g, prod.inputs[1], scale);
  a.scale = scale;
  const Node& kt = g.node(ktv);
  std::vector<int64_t> perm;
  ValueId kx;
  if (kt.op == Op::permute && kt.type.rank() == 4) {
    perm = kt.attr_ints("perm"), kx = kt.inputs[0];
  } else if (auto chain = view_as_permute(g, ktv)) {
    kx = chain->first, perm = chain->second;
  } else {
    return std::nullopt;
  }
  std::swap(perm[2], perm[3]);  // K = permute(x, perm): kt = K with its last two axes swapped
  if (perm != std::vector<int64_t>{0, 1, 2, 3}) {
    // A permuted K cannot also be a grouped-query expansion (not matched).
    a.k = kx;
    a.k_perm = perm;
  } else {
    a.k = unexpand_heads(g, kx);
  }
  a.q = qv;
  a.v = unexpand_heads(g, pv.inputs[1]);
  // flash_attn's own shape rules decide the rest (ranks, heads, head dims).
  const Type& qt = g.type(a.q);
  Type kt4 = g.type(a.k);
  if (!a.k_perm.empty()) {
    if (kt4.rank() != 4) return std::nullopt;
    Shape ks;
    for (int64_t d : a.k_perm) ks.push_back(kt4.shape[static_cast<size_t>(d)]);
    kt4.shape = ks;
  }
  const Type& vt = g.type(a.v);
  if (qt.rank() != 4 || kt4.rank() != 4 || vt.rank() != 4) return std::nullopt;
  if (qt.shape[0] != kt4.shape[0] || kt4.shape[1] != vt.shape[1] || kt4.shape[2] != vt.shape[2]) return std::nullopt;
  if (!qt.shape[1].div_exact(kt4.shape[1])) return std::nullopt;
  if (g.type(qv).shape[2] != prod.type.shape[2]) return std::nullopt;
  // The replacement must have exactly the attention's type.
  std::vector<Type> types = {qt, kt4, vt};
  std::vector<AttrValue> attrs = {a.scale, a.offset >= 0, a.bias >= 0 || a.mask >= 0, a.zero_empty};
  if (a.offset >= 0) types.push_back(g.type(a.offset));
  if (a.bias >= 0 || a.mask >= 0) types.push_back(Type{st.dtype, {Dim(1), Dim(1), Dim(1), Dim(1)}});
  try {
    if (infer_type(Op::flash_attn, types, attrs) != pv.type) return std::nullopt;
  } catch (const Error&) {
    return std::nullopt;
  }
  return a;
}

// The bias operand in the new graph: rank 4, built from a boolean mask when
// that is what matched.
ValueId bias_operand(Rewriter& rw, const Attention& a, DType dt) {
  Graph& out = rw.out();
  ValueId b;
  if (a.mask >= 0) {
    ValueId m = rw.map(a.mask);
    ValueId ninf = out.add_const(Type{dt, {}}, {-std::numeric_limits<double>::infinity()});
    ValueId zero = out.add_const(Type{dt, {}}, {0.0});
    b = out.add(Op::where, {m, ninf, zero});
  } else {
    b = rw.map(a.bias);
  }
  const Shape& bs = out.type(b).shape;
  if (bs.size() == 4) return b;
  Shape s(4 - bs.size(), Dim(1));
  s.insert(s.end(), bs.begin(), bs.end());
  return out.add(Op::reshape, {b}, {{"shape", s}});
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
    ValueId k = rw.map(a->k);
    if (!a->k_perm.empty()) k = out.add(Op::permute, {k}, {{"perm", a->k_perm}});
    std::vector<ValueId> ins = {rw.map(a->q), k, rw.map(a->v)};
    NamedAttrs attrs = {{"scale", a->scale}};
    if (a->offset >= 0) {
      ins.push_back(rw.map(a->offset));
      attrs.push_back({"causal", true});
    }
    if (a->bias >= 0 || a->mask >= 0) {
      ins.push_back(bias_operand(rw, *a, out.type(ins[0]).dtype));
      attrs.push_back({"bias", true});
    }
    if (a->zero_empty) attrs.push_back({"zero_empty_rows", true});
    return out.add(Op::flash_attn, ins, attrs);
  });
  return true;
}

}  // namespace tj
