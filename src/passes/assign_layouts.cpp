// assign_layouts: convolutions over 2 spatial dims that have a channels-last
// kernel (f32, constant weights, one group, depthwise, or groups of 2, 4 or 8
// inputs and as many outputs; see
// codegen/cpp/kernels/conv.cpp) take the channels-last form, and the values
// between them follow, so that a chain of convolutions, activations,
// residual adds, squeeze-excitation scales and global pools stays channels
// last, with reorders only at its boundaries (XLA's layout assignment, as a
// rewrite of the graph: a layout is a permutation of a value's dims).
//
// Each value v may get a channels-last twin ([N, H, W, C] for [N, C, H, W];
// [N, L, C] for [N, C, L]); v itself becomes the twin permuted back, a view
// that only consumers left channels first read (through their own strided
// reads, or a copy where they need one). Rules, per node:
//   conv, eligible     conv{channels_last} of its input's twin (the input
//                      permuted, where it has none: a reorder);
//   max_pool, sum_pool of rank 4, f32, its input with a twin:
//                      the pool{channels_last} of the twin;
//   elementwise        (and silu, gelu) of rank 3 or 4, every operand of
//                      at most that rank, some operand with a twin: the op
//                      on the operands' twins (broadcast operands permuted,
//                      views; one of lower rank, such as an ONNX batch-norm's
//                      [C, 1, 1] before a dense block's conv, first given
//                      the leading 1s it broadcasts with);
//   concat, slice      of rank 3 or 4, some operand with a twin: along the
//                      twin's axis (a max pool's padding and windows, a
//                      dense block's concatenated channels);
//   reshape            [N, C, H, W] -> [N, C, H*W] of a value with a twin:
//                      the twin [N, H*W, C]; a reshape of a value whose
//                      spatial dims are all 1 reads the twin alike (same
//                      order);
//   permute            [N, H, W, C] -> [N, C, H, W] of any value u: u is
//                      its twin (the residual adds of a net that runs its
//                      blocks channels last, convnext's, stay so);
//   reduction          over spatial axes only, of a value with a twin: over
//                      the twin's axes (keepdim: a twin; all spatial axes
//                      dropped: [N, C], the same values);
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
  std::vector<ValueId> twin(g.size(), -1);  // per old value: its channels-last form in `out`
  auto permute = [&](ValueId v, std::vector<int64_t> perm) { return out.add(Op::permute, {v}, {{"perm", std::move(perm)}}); };
  // Old value v channels last in `out`: its twin, or v permuted (at rank
  // `r`: one of lower rank first reshaped with leading 1s, as it broadcasts).
  auto last_of = [&](ValueId v, int64_t r = -1) {
    if (twin[static_cast<size_t>(v)] >= 0) return twin[static_cast<size_t>(v)];
    const Shape& s = g.type(v).shape;
    const int64_t vr = static_cast<int64_t>(s.size());
    if (vr == 0) return rw.map(v);
    ValueId u = rw.map(v);
    if (r > vr) {
      Shape full(static_cast<size_t>(r - vr), Dim(1));
      full.insert(full.end(), s.begin(), s.end());
      u = out.add(Op::reshape, {u}, {{"shape", full}});
    }
    return permute(u, channels_last_perm(std::max(r, vr)));
  };
  // Records y as v's twin; v itself is y permuted back.
  auto as_twin = [&](ValueId v, ValueId y) {
    twin[static_cast<size_t>(v)] = y;
    return permute(y, channels_first_perm(out.type(y).rank()));
  };
  g = rw.run([&](ValueId v) -> ValueId {
    const Node& n = g.node(v);
    const int64_t r = n.type.rank();
    auto has_twin = [&](ValueId u) { return twin[static_cast<size_t>(u)] >= 0; };
    if (eligible(g, n)) {
      std::vector<ValueId> ins = rw.map_all(n.inputs);
      ins[0] = last_of(n.inputs[0]);
      return as_twin(v, out.add_raw(Op::conv, ins, n.with_attr("channels_last", true)));
    }
    if (is_pool(n.op) && r == 4 && n.type.dtype == DType::f32 && !n.attr_bool("channels_last") && has_twin(n.inputs[0]))
      return as_twin(v, out.add_raw(n.op, {last_of(n.inputs[0])}, n.with_attr("channels_last", true)));
    if (per_element(n) && (r == 3 || r == 4) && !n.inputs.empty()) {
      bool fits = true, some = false;
      for (ValueId u : n.inputs) {
        const int64_t ur = g.type(u).rank();
        fits &= ur <= r;
        some |= has_twin(u);
      }
      if (fits && some) {
        std::vector<ValueId> ins;
        for (ValueId u : n.inputs) ins.push_back(last_of(u, r));
        return as_twin(v, out.add_raw(n.op, ins, n.attrs));
      }
      return Rewriter::kCopy;
    }
    if ((n.op == Op::concat || n.op == Op::slice) && (r == 3 || r == 4)) {
      bool fits = true, some = false;
      for (ValueId u : n.inputs) fits &= g.type(u).rank() == r, some |= has_twin(u);
      if (!fits || !some) return Rewriter::kCopy;
      int64_t a = n.attr_int("axis");
      a = a < 0 ? a + r : a;
      std::vector<ValueId> ins;
      for (ValueId u : n.inputs) ins.push_back(last_of(u));
      return as_twin(v, out.add_raw(n.op, ins, n.with_attr("axis", a == 0 ? 0 : a == 1 ? r - 1 : a - 1)));
    }
    // A rank-4 value permuted channels first ([N, H, W, C] -> [N, C, H, W],
    // as convnext writes its blocks around channels-last linears): that
    // value is its twin.
    if (n.op == Op::permute && r == 4 && n.attr_ints("perm") == channels_first_perm(4)) return as_twin(v, rw.map(n.inputs[0]));
    if (n.op == Op::reshape && has_twin(n.inputs[0])) {
      const Shape& is = g.type(n.inputs[0]).shape;
      const Shape& os = n.type.shape;
      const ValueId t = twin[static_cast<size_t>(n.inputs[0])];
      if (is.size() == 4 && os.size() == 3 && os[0] == is[0] && os[1] == is[1] && os[2] == is[2] * is[3])
        return as_twin(v, out.add(Op::reshape, {t}, {{"shape", Shape{is[0], is[2] * is[3], is[1]}}}));
      bool ones = true;  // every spatial dim 1: the twin holds the values in the same order
      for (size_t i = 2; i < is.size(); ++i) ones &= is[i] == Dim(1);
      if (ones) return out.add(Op::reshape, {t}, {{"shape", os}});
      return Rewriter::kCopy;
    }
    if (is_reduction(n.op) && has_twin(n.inputs[0])) {
      const int64_t ir = g.type(n.inputs[0]).rank();
      std::vector<int64_t> axes = n.attr_ints("axes"), mapped;
      for (int64_t& a : axes) a = a < 0 ? a + ir : a;
      if (std::any_of(axes.begin(), axes.end(), [](int64_t a) { return a < 2; })) return Rewriter::kCopy;
      for (int64_t a : axes) mapped.push_back(a - 1);
      const bool keep = n.attr_bool("keepdim");
      if (!keep && static_cast<int64_t>(axes.size()) != ir - 2) return Rewriter::kCopy;
      const ValueId t = twin[static_cast<size_t>(n.inputs[0])];
      const ValueId y = out.add_raw(n.op, {t}, n.with_attr("axes", mapped));
      return keep ? as_twin(v, y) : y;  // all spatial axes dropped: [N, C] either way
    }
    return Rewriter::kCopy;
  });
  return true;
}

}  // namespace tj
