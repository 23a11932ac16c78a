// assign_layouts: convolutions over 2 spatial dims that have a channels-last
// kernel (f32, constant weights, one group, depthwise, or groups of 2, 4 or 8
// inputs and as many outputs; see
// codegen/cpp/kernels/conv.cpp) take the channels-last form, and the values
// between them follow, so that a chain of convolutions, activations,
// residual adds, squeeze-excitation scales and global pools stays channels
// last, with reorders only at its boundaries (XLA's layout assignment, as a
// rewrite of the graph: a layout is a permutation of a value's dims).
//
// Each value v may get a twin: v permuted, mostly channels last ([N, H, W, C]
// for [N, C, H, W]; [N, L, C] for [N, C, L]); v itself becomes the twin
// permuted back, a view that only consumers left channels first read
// (through their own strided reads, or a copy where they need one). Rules,
// per node:
//   conv, eligible     conv{channels_last} of its input's twin (the input
//                      permuted, where it has none: a reorder);
//   max_pool, sum_pool of rank 4, f32, its input with a channels-last twin:
//                      the pool{channels_last} of the twin;
//   elementwise        (and silu, gelu), every operand of at most its rank,
//                      one of its rank with a twin: the op in that twin's
//                      order, on the operands' twins in it (others
//                      permuted, views; one of lower rank, such as an ONNX
//                      batch-norm's [C, 1, 1] before a dense block's conv,
//                      first given the leading 1s it broadcasts with);
//   concat, slice      of rank 3 or 4, some operand with a twin: along the
//                      twin's axis (a max pool's padding and windows, a
//                      dense block's concatenated channels);
//   reshape            [N, C, H, W] -> [N, C, H*W] of a value with a twin:
//                      the twin [N, H*W, C]; [N, C, H, W] -> [N, R, C/R, H,
//                      W] (split attention's radix, resnest's): the twin
//                      [N, H, W, R, C/R], in the order (0, 3, 4, 1, 2); a
//                      reshape of a twin that holds the values in the same
//                      order (the dims it moves are 1s) reads the twin;
//   permute            [N, H, W, C] -> [N, C, H, W] of any value u: u is
//                      its twin (the residual adds of a net that runs its
//                      blocks channels last, convnext's, stay so);
//   reduction          of a value with a twin, whose reduced axes the twin
//                      keeps in their order: over the twin's axes, the
//                      result a twin in the order of the axes left (a
//                      global pool's [N, C] is itself; the radix sum's
//                      [N, H, W, C/R] is channels last);
//   anything else      reads the values channels first.
// The same values in the same order of operations, so bit-exact.
#include <algorithm>

#include "ir/layout.h"
#include "ir/rewriter.h"
#include "passes/passes.h"

namespace tj {

namespace {

bool eligible(const Graph& g, const Node& n) {
  if (n.op != Op::conv || n.type.dtype != DType::f32 || n.type.rank() != 4 || n.attr_bool("channels_last")) return false;
  const Node& w = g.node(n.inputs[1]);
  if (w.op != Op::constant || w.const_data()->size() <= 1) return false;
  const int64_t groups = n.attr_int("groups");
  return conv_quad_lanes(w.type.shape, groups) > 0 || taps_first_conv(w.type.shape, groups);
}

// A value's form the chain reads: v in `out`, the old value permuted by perm.
struct Twin {
  ValueId v = -1;
  std::vector<int64_t> perm;
};

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> back(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) back[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return back;
}

// Whether a value of shape s permuted by perm holds its values in the same
// order: its dims other than 1 keep their order.
bool same_order(const Shape& s, const std::vector<int64_t>& perm) {
  int64_t last = -1;
  for (int64_t d : perm) {
    if (s[static_cast<size_t>(d)] == Dim(1)) continue;
    if (d < last) return false;
    last = d;
  }
  return true;
}

bool is_reduction(Op op) { return op == Op::sum || op == Op::mean || op == Op::amax; }

// Elementwise, or a composite of one operand computed per element (the
// torch frontend's silu and gelu, decomposed later).
bool per_element(const Node& n) {
  return n.def().category == OpCategory::elementwise || n.op == Op::silu || n.op == Op::gelu;
}

}  // namespace

bool assign_layouts(Graph& g, const PassOptions&) {
  bool any = false;
  for (const Node& n : g.nodes()) any |= eligible(g, n);
  if (!any) return false;
  Rewriter rw(g);
  Graph& out = rw.out();
  std::vector<Twin> twin(g.size());  // per old value: its form in `out` that the chain reads
  auto has_twin = [&](ValueId u) { return twin[static_cast<size_t>(u)].v >= 0; };
  auto twin_of = [&](ValueId u) -> const Twin& { return twin[static_cast<size_t>(u)]; };
  auto permute = [&](ValueId v, std::vector<int64_t> perm) { return out.add(Op::permute, {v}, {{"perm", std::move(perm)}}); };
  // Old value v in the order `perm` (of rank r) in `out`: its twin where
  // that is its order, else v permuted (one of lower rank first reshaped
  // with leading 1s, as it broadcasts).
  auto in_order = [&](ValueId v, const std::vector<int64_t>& perm) {
    const int64_t r = static_cast<int64_t>(perm.size());
    if (has_twin(v) && twin_of(v).perm == perm) return twin_of(v).v;
    const Shape& s = g.type(v).shape;
    const int64_t vr = static_cast<int64_t>(s.size());
    if (vr == 0) return rw.map(v);
    ValueId u = rw.map(v);
    if (r > vr) {
      Shape full(static_cast<size_t>(r - vr), Dim(1));
      full.insert(full.end(), s.begin(), s.end());
      u = out.add(Op::reshape, {u}, {{"shape", full}});
    }
    return permute(u, perm);
  };
  auto last_of = [&](ValueId v) { return in_order(v, channels_last_perm(g.type(v).rank())); };
  // Records y as v's twin in the order `perm`; v itself is y permuted back.
  auto as_twin = [&](ValueId v, ValueId y, std::vector<int64_t> perm) {
    const std::vector<int64_t> back = inverse(perm);
    twin[static_cast<size_t>(v)] = {y, std::move(perm)};
    return permute(y, back);
  };
  auto as_last = [&](ValueId v, ValueId y) { return as_twin(v, y, channels_last_perm(out.type(y).rank())); };
  g = rw.run([&](ValueId v) -> ValueId {
    const Node& n = g.node(v);
    const int64_t r = n.type.rank();
    if (eligible(g, n)) {
      std::vector<ValueId> ins = rw.map_all(n.inputs);
      ins[0] = last_of(n.inputs[0]);
      return as_last(v, out.add_raw(Op::conv, ins, n.with_attr("channels_last", true)));
    }
    if (is_pool(n.op) && r == 4 && n.type.dtype == DType::f32 && !n.attr_bool("channels_last") && has_twin(n.inputs[0]) &&
        twin_of(n.inputs[0]).perm == channels_last_perm(4))
      return as_last(v, out.add_raw(n.op, {twin_of(n.inputs[0]).v}, n.with_attr("channels_last", true)));
    if (per_element(n) && !n.inputs.empty()) {
      // The order of the first operand of the op's rank with a twin.
      const Twin* lead = nullptr;
      bool fits = true;
      for (ValueId u : n.inputs) {
        const int64_t ur = g.type(u).rank();
        fits &= ur <= r;
        if (!lead && ur == r && has_twin(u)) lead = &twin_of(u);
      }
      if (!fits || !lead) return Rewriter::kCopy;
      const std::vector<int64_t> perm = lead->perm;
      std::vector<ValueId> ins;
      for (ValueId u : n.inputs) ins.push_back(in_order(u, perm));
      return as_twin(v, out.add_raw(n.op, ins, n.attrs), perm);
    }
    if ((n.op == Op::concat || n.op == Op::slice) && (r == 3 || r == 4)) {
      bool fits = true, some = false;
      for (ValueId u : n.inputs) fits &= g.type(u).rank() == r, some |= has_twin(u);
      if (!fits || !some) return Rewriter::kCopy;
      int64_t a = n.attr_int("axis");
      a = a < 0 ? a + r : a;
      std::vector<ValueId> ins;
      for (ValueId u : n.inputs) ins.push_back(last_of(u));
      return as_last(v, out.add_raw(n.op, ins, n.with_attr("axis", a == 0 ? 0 : a == 1 ? r - 1 : a - 1)));
    }
    // A rank-4 value permuted channels first ([N, H, W, C] -> [N, C, H, W],
    // as convnext writes its blocks around channels-last linears): that
    // value is its twin.
    if (n.op == Op::permute && r == 4 && n.attr_ints("perm") == channels_first_perm(4)) return as_last(v, rw.map(n.inputs[0]));
    if (n.op == Op::reshape && has_twin(n.inputs[0])) {
      const Shape& is = g.type(n.inputs[0]).shape;
      const Shape& os = n.type.shape;
      const Twin& t = twin_of(n.inputs[0]);
      if (t.perm == channels_last_perm(4)) {
        if (os.size() == 3 && os[0] == is[0] && os[1] == is[1] && os[2] == is[2] * is[3])
          return as_last(v, out.add(Op::reshape, {t.v}, {{"shape", Shape{is[0], is[2] * is[3], is[1]}}}));
        // [N, C, H, W] -> [N, R, C/R, H, W], split-attention's radix:
        // [N, H, W, C] -> [N, H, W, R, C/R], the same values in place.
        if (os.size() == 5 && os[0] == is[0] && os[1] * os[2] == is[1] && os[3] == is[2] && os[4] == is[3])
          return as_twin(v, out.add(Op::reshape, {t.v}, {{"shape", Shape{is[0], is[2], is[3], os[1], os[2]}}}), {0, 3, 4, 1, 2});
      }
      if (same_order(is, t.perm)) return out.add(Op::reshape, {t.v}, {{"shape", os}});
      return Rewriter::kCopy;
    }
    if (is_reduction(n.op) && has_twin(n.inputs[0])) {
      const int64_t ir = g.type(n.inputs[0]).rank();
      const Twin& t = twin_of(n.inputs[0]);
      std::vector<int64_t> axes = n.attr_ints("axes"), mapped;
      for (int64_t& a : axes) a = a < 0 ? a + ir : a;
      std::vector<bool> reduced(static_cast<size_t>(ir), false);
      for (int64_t a : axes) reduced[static_cast<size_t>(a)] = true;
      for (int64_t i = 0; i < ir; ++i)
        if (reduced[static_cast<size_t>(t.perm[static_cast<size_t>(i)])]) mapped.push_back(i);
      // The twin's reduced axes in their old order, so the same sums in the same order.
      for (size_t i = 1; i < mapped.size(); ++i)
        if (t.perm[static_cast<size_t>(mapped[i])] < t.perm[static_cast<size_t>(mapped[i - 1])]) return Rewriter::kCopy;
      const ValueId y = out.add_raw(n.op, {t.v}, n.with_attr("axes", mapped));
      if (n.attr_bool("keepdim")) return as_twin(v, y, t.perm);
      // The twin's order of the dims left, numbered as the result's.
      std::vector<int64_t> left;
      for (int64_t a : t.perm)
        if (!reduced[static_cast<size_t>(a)]) left.push_back(a - std::count(reduced.begin(), reduced.begin() + a, true));
      if (std::is_sorted(left.begin(), left.end())) return y;  // [N, C] of a global pool: the same values either way
      if (same_order(n.type.shape, left)) return out.add(Op::reshape, {y}, {{"shape", n.type.shape}});
      return as_twin(v, y, left);
    }
    return Rewriter::kCopy;
  });
  return true;
}

}  // namespace tj
