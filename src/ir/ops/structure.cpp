// Op rows for sources, reductions, the contraction, views and data movement.
// Their interpreter kernels are in src/reference/kernels.cpp.
#include <algorithm>
#include <limits>

#include "ir/decomposer.h"
#include "ir/differ.h"
#include "ir/factors.h"
#include "ir/ops/infer.h"
#include "ir/ops/rows.h"

namespace tj::rows {

namespace {

using AK = AttrKind;
using Cat = OpCategory;
using namespace infer;

Type infer_iota(InferCtx& c) {
  DType t = c.attr<DType>("dtype");
  if (t == DType::boolean) c.fail("iota of bool");
  return {t, {c.attr<Dim>("n")}};
}

Type infer_reduce(InferCtx& c) {
  if (c.in[0].dtype == DType::boolean) c.fail("reduction of bool");
  if (c.def.op == Op::mean) require_float(c, 0);
  Shape out = reduced_shape(c, c.attr<std::vector<int64_t>>("axes"), c.attr<bool>("keepdim"));
  return {c.in[0].dtype, out};
}

Type infer_argmax(InferCtx& c) {
  if (c.in[0].dtype == DType::boolean) c.fail("argmax of bool");
  auto& axis = c.attr<int64_t>("axis");
  axis = c.axis(axis, c.rank(0));
  if (c.in[0].shape[static_cast<size_t>(axis)] == Dim(0)) c.fail("argmax over an empty axis");
  std::vector<int64_t> axes{axis};
  return {DType::i64, reduced_shape(c, axes, c.attr<bool>("keepdim"))};
}

// The first index of the maximum (NaN counts as the maximum, the first NaN
// wins, as numpy and torch): m = amax(x); hit = x == m or x is NaN; the
// largest -i among hits is minus the first.
ValueId decompose_argmax(Decomposer& d) {
  ValueId x = d.in[0];
  int64_t axis = d.n.attr_int("axis");
  const Type t = d.g.type(x);  // a copy: adding nodes moves them
  ValueId m = d.reduce(Op::amax, x, axis);
  ValueId hit = d.op(Op::eq, {x, m});
  if (is_float(t.dtype)) hit = d.op(Op::logical_or, {hit, d.op(Op::ne, {x, x})});
  Shape along(t.shape.size(), Dim(1));
  along[static_cast<size_t>(axis)] = t.shape[static_cast<size_t>(axis)];
  ValueId i = d.op(Op::reshape, {d.op(Op::iota, {}, {{"n", t.shape[static_cast<size_t>(axis)]}, {"dtype", DType::i64}})}, {{"shape", along}});
  ValueId lowest = d.c(static_cast<double>(std::numeric_limits<int64_t>::min()), DType::i64);
  ValueId best = d.reduce(Op::amax, d.op(Op::where, {hit, d.op(Op::neg, {i}), lowest}), axis);
  ValueId r = d.op(Op::neg, {best});
  if (!d.n.attr_bool("keepdim")) r = d.op(Op::squeeze, {r}, {{"axes", std::vector<int64_t>{axis}}});
  return r;
}

Type infer_matmul(InferCtx& c) {
  require_same_dtype(c);
  if (c.in[0].dtype == DType::boolean) c.fail("matmul of bool");
  const Shape& a = c.in[0].shape;
  const Shape& b = c.in[1].shape;
  if (a.size() < 2 || b.size() < 2) c.fail("matmul operands must have rank >= 2");
  const Dim& k1 = a[a.size() - 1];
  const Dim& k2 = b[b.size() - 2];
  if (k1 != k2) c.fail("contracting dimensions differ: " + k1.str() + " vs " + k2.str());
  Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  Shape out = broadcast(c, {&ba, &bb});
  out.push_back(a[a.size() - 2]);
  out.push_back(b[b.size() - 1]);
  return {c.in[0].dtype, out};
}

Type infer_reshape(InferCtx& c) {
  const Shape& to = c.attr<Shape>("shape");
  check_dims_nonnegative(c, to);
  if (numel(to) != numel(c.in[0].shape))
    c.fail("cannot reshape " + shape_str(c.in[0].shape) + " to " + shape_str(to) + ": element counts differ");
  return {c.in[0].dtype, to};
}

Type infer_permute(InferCtx& c) {
  auto& perm = c.attr<std::vector<int64_t>>("perm");
  int r = c.rank(0);
  if (static_cast<int>(perm.size()) != r) c.fail("permutation has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(r));
  std::vector<bool> seen(static_cast<size_t>(r), false);
  Shape out;
  for (auto& p : perm) {
    p = c.axis(p, r);
    if (seen[static_cast<size_t>(p)]) c.fail("permutation repeats axis " + std::to_string(p));
    seen[static_cast<size_t>(p)] = true;
    out.push_back(c.in[0].shape[static_cast<size_t>(p)]);
  }
  return {c.in[0].dtype, out};
}

Type infer_expand(InferCtx& c) {
  const Shape& to = c.attr<Shape>("shape");
  const Shape& from = c.in[0].shape;
  check_dims_nonnegative(c, to);
  if (to.size() < from.size()) c.fail("cannot expand " + shape_str(from) + " to lower rank " + shape_str(to));
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != to[off + i] && from[i] != Dim(1))
      c.fail("cannot expand " + shape_str(from) + " to " + shape_str(to));
  return {c.in[0].dtype, to};
}

Type infer_slice(InferCtx& c) {
  int r = c.rank(0);
  auto& axis = c.attr<int64_t>("axis");
  axis = c.axis(axis, r);
  const Dim& start = c.attr<Dim>("start");
  const Dim& end = c.attr<Dim>("end");
  int64_t step = c.attr<int64_t>("step");
  const Dim& dim = c.in[0].shape[static_cast<size_t>(axis)];
  if (step < 1) c.fail("slice step must be >= 1, got " + std::to_string(step));
  Dim len = end - start;
  if (auto l = len.as_const(); l && *l < 0) c.fail("slice end " + end.str() + " before start " + start.str());
  if (auto s = start.as_const(); s && *s < 0) c.fail("slice start " + start.str() + " is negative");
  if ((end - dim).provably_positive()) c.fail("slice end " + end.str() + " beyond dimension " + dim.str());
  if ((Dim(0) - len).provably_positive()) c.fail("slice end " + end.str() + " before start " + start.str());
  Shape out = c.in[0].shape;
  if (step == 1) {
    out[static_cast<size_t>(axis)] = len;
  } else {
    auto l = len.as_const();
    if (!l) c.fail("a strided slice needs a constant length, got " + len.str());
    out[static_cast<size_t>(axis)] = Dim(*l == 0 ? 0 : (*l - 1) / step + 1);  // ceil(l / step), without overflow
  }
  return {c.in[0].dtype, out};
}

Type infer_squeeze(InferCtx& c) {
  auto& axes = c.attr<std::vector<int64_t>>("axes");
  int r = c.rank(0);
  for (auto& a : axes) a = c.axis(a, r);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  Shape out;
  for (int i = 0; i < r; ++i) {
    const Dim& d = c.in[0].shape[static_cast<size_t>(i)];
    if (std::binary_search(axes.begin(), axes.end(), i)) {
      if (d != Dim(1)) c.fail("cannot squeeze axis " + std::to_string(i) + " of size " + d.str());
    } else {
      out.push_back(d);
    }
  }
  return {c.in[0].dtype, out};
}

Type infer_unsqueeze(InferCtx& c) {
  auto& axes = c.attr<std::vector<int64_t>>("axes");
  int r = c.rank(0) + static_cast<int>(axes.size());
  for (auto& a : axes) a = c.axis(a, r);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) c.fail("repeated unsqueeze axis");
  Shape out;
  size_t j = 0;
  for (int i = 0; i < r; ++i) {
    if (std::binary_search(axes.begin(), axes.end(), i)) out.push_back(Dim(1));
    else out.push_back(c.in[0].shape[j++]);
  }
  return {c.in[0].dtype, out};
}

Type infer_concat(InferCtx& c) {
  require_same_dtype(c);
  int r = c.rank(0);
  auto& axis = c.attr<int64_t>("axis");
  axis = c.axis(axis, r);
  Shape out = c.in[0].shape;
  for (size_t i = 1; i < c.in.size(); ++i) {
    if (c.rank(i) != r) c.fail("concat operands have different ranks");
    for (int d = 0; d < r; ++d) {
      if (d == axis) continue;
      if (c.in[i].shape[static_cast<size_t>(d)] != out[static_cast<size_t>(d)])
        c.fail("concat operands differ in dimension " + std::to_string(d) + ": " + shape_str(c.in[0].shape) +
               " vs " + shape_str(c.in[i].shape));
    }
    out[static_cast<size_t>(axis)] = out[static_cast<size_t>(axis)] + c.in[i].shape[static_cast<size_t>(axis)];
  }
  return {c.in[0].dtype, out};
}

Type infer_gather(InferCtx& c) {
  auto& axis = c.attr<int64_t>("axis");
  axis = c.axis(axis, c.rank(0));
  if (!is_int(c.in[1].dtype)) c.fail("gather indices must be integers, got " + c.in[1].str());
  const Shape& t = c.in[0].shape;
  Shape out(t.begin(), t.begin() + axis);
  out.insert(out.end(), c.in[1].shape.begin(), c.in[1].shape.end());
  out.insert(out.end(), t.begin() + axis + 1, t.end());
  return {c.in[0].dtype, out};
}

// base, with updates of gather's result shape (over base's dims before
// and after the axis, the indices' dims in between).
Type infer_scatter_add(InferCtx& c) {
  auto& axis = c.attr<int64_t>("axis");
  axis = c.axis(axis, c.rank(0));
  if (!is_int(c.in[1].dtype)) c.fail("scatter_add indices must be integers, got " + c.in[1].str());
  if (!is_float(c.in[0].dtype)) c.fail("scatter_add adds floating-point values, got " + c.in[0].str());
  const Shape& t = c.in[0].shape;
  Shape want(t.begin(), t.begin() + axis);
  want.insert(want.end(), c.in[1].shape.begin(), c.in[1].shape.end());
  want.insert(want.end(), t.begin() + axis + 1, t.end());
  const Type upd{c.in[0].dtype, want};
  if (c.in[2] != upd) c.fail("scatter_add updates must be " + upd.str() + " (what gather would read), got " + c.in[2].str());
  return c.in[0];
}

// Derivative rules (ir/differ.h).

// A reduction's operand shape with its reduced axes kept as 1.
Shape kept_shape(const Differ& d) {
  Shape s = d.type(d.x(0)).shape;
  for (int64_t a : d.n.attr_ints("axes")) s[static_cast<size_t>(a)] = Dim(1);
  return s;
}

void d_sum(Differ& d) { d.give(0, d.expand_to(d.keepdim(d.dy, kept_shape(d)), d.type(d.x(0)).shape)); }

void d_mean(Differ& d) {
  const Shape xs = d.type(d.x(0)).shape;
  Dim count(1);
  for (int64_t a : d.n.attr_ints("axes")) count = count * xs[static_cast<size_t>(a)];
  d.give(0, d.expand_to(d.div(d.keepdim(d.dy, kept_shape(d)), d.size(count, d.dtype())), xs));
}

// To the maximal elements, shared evenly among ties (as torch and JAX).
void d_amax(Differ& d) {
  const Shape xs = d.type(d.x(0)).shape, kept = kept_shape(d);
  std::vector<int64_t> axes = d.n.attr_ints("axes");
  ValueId hit = d.op(Op::eq, {d.x(0), d.expand_to(d.keepdim(d.y, kept), xs)});
  ValueId ties = d.reduce(Op::sum, d.op(Op::cast, {hit}, {{"to", d.dtype()}}), axes);
  d.give(0, d.keep(hit, d.expand_to(d.div(d.keepdim(d.dy, kept), ties), xs)));
}

// The permutation swapping the last two axes of a rank-r value.
std::vector<int64_t> swap_last(int64_t r) {
  std::vector<int64_t> p(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) p[static_cast<size_t>(i)] = i;
  std::swap(p[static_cast<size_t>(r - 1)], p[static_cast<size_t>(r - 2)]);
  return p;
}

// dA = dY B^T, dB = A^T dY (batch dims broadcast: give sums them back).
void d_matmul(Differ& d) {
  ValueId a = d.x(0), b = d.x(1);
  const Type at = d.type(a), bt = d.type(b), yt = d.type(d.dy);
  if (d.wants(0)) d.give(0, d.op(Op::matmul, {d.dy, d.op(Op::permute, {b}, {{"perm", swap_last(bt.rank())}})}));
  if (!d.wants(1)) return;
  // A matrix applied to a batch (a weight, x @ W): its gradient sums A_i^T dY_i
  // over the batch, one product with the batch folded into the rows
  // ([batch*M, K]^T [batch*M, N]) rather than a product per batch then a sum.
  if (bt.rank() == 2 && at.rank() > 2 && Shape(at.shape.begin(), at.shape.end() - 2) == Shape(yt.shape.begin(), yt.shape.end() - 2)) {
    const Dim rows = numel(Shape(at.shape.begin(), at.shape.end() - 1));
    ValueId a2 = d.op(Op::reshape, {a}, {{"shape", Shape{rows, at.shape.back()}}});
    ValueId dy2 = d.op(Op::reshape, {d.dy}, {{"shape", Shape{rows, yt.shape.back()}}});
    return d.give(1, d.op(Op::matmul, {d.op(Op::permute, {a2}, {{"perm", swap_last(2)}}), dy2}));
  }
  d.give(1, d.op(Op::matmul, {d.op(Op::permute, {a}, {{"perm", swap_last(at.rank())}}), d.dy}));
}

// reshape, squeeze, unsqueeze: the cotangent in the operand's shape.
void d_reshape(Differ& d) { d.give(0, d.op(Op::reshape, {d.dy}, {{"shape", d.type(d.x(0)).shape}})); }

void d_permute(Differ& d) {
  const std::vector<int64_t>& perm = d.n.attr_ints("perm");
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  d.give(0, d.op(Op::permute, {d.dy}, {{"perm", inverse}}));
}

// Broadcast: give sums the expanded dims back.
void d_expand(Differ& d) { d.give(0, d.dy); }

// The cotangent between zeros of the sliced-off lengths.
// The cotangent back in place: with a step, spread out first (step - 1
// zeros after each element, the last ones cut), then zeros before and after.
void d_slice(Differ& d) {
  int64_t axis = d.n.attr_int("axis"), step = d.n.attr_int("step");
  const size_t a = static_cast<size_t>(axis);
  const Type xt = d.type(d.x(0));
  const Dim& start = d.n.attr_dim("start");
  ValueId dy = d.dy;
  Type yt = d.type(dy);
  Dim len = yt.shape[a];
  if (step != 1 && len != Dim(0)) {
    Type col = yt;
    col.shape.insert(col.shape.begin() + axis + 1, Dim(1));
    Type gap = col;
    gap.shape[a + 1] = Dim(step - 1);
    ValueId cols = d.op(Op::concat, {d.op(Op::unsqueeze, {dy}, {{"axes", std::vector<int64_t>{axis + 1}}}), d.zeros(gap)}, {{"axis", axis + 1}});
    Shape spread = yt.shape;
    spread[a] = len * Dim(step);
    len = (len - Dim(1)) * Dim(step) + Dim(1);
    dy = d.op(Op::slice, {d.op(Op::reshape, {cols}, {{"shape", spread}})}, {{"axis", axis}, {"start", Dim(0)}, {"end", len}});
  }
  Dim after = xt.shape[a] - start - len;
  std::vector<ValueId> parts;
  auto zeros = [&](const Dim& n) {
    Type t = xt;
    t.shape[a] = n;
    parts.push_back(d.zeros(t));
  };
  if (start != Dim(0)) zeros(start);
  parts.push_back(dy);
  if (after != Dim(0)) zeros(after);
  d.give(0, parts.size() == 1 ? dy : d.op(Op::concat, parts, {{"axis", axis}}));
}

void d_concat(Differ& d) {
  int64_t axis = d.n.attr_int("axis");
  Dim at(0);
  for (size_t i = 0; i < d.n.inputs.size(); ++i) {
    Dim len = d.type(d.x(i)).shape[static_cast<size_t>(axis)];
    if (d.wants(i)) d.give(i, d.op(Op::slice, {d.dy}, {{"axis", axis}, {"start", at}, {"end", at + len}}));
    at = at + len;
  }
}

// gather: scatter-add of the cotangent into zeros of the table's shape
// (negative indices count from the end, as gather reads them).
void d_gather(Differ& d) {
  if (!d.wants(0)) return;
  d.give(0, d.op(Op::scatter_add, {d.zeros(d.type(d.x(0))), d.x(1), d.dy}, {{"axis", d.n.attr_int("axis")}}));
}

// scatter_add: the base's cotangent is dy; the updates' is dy read back
// where they were added.
void d_scatter_add(Differ& d) {
  if (d.wants(0)) d.give(0, d.dy);
  if (d.wants(2)) d.give(2, d.op(Op::gather, {d.dy, d.x(1)}, {{"axis", d.n.attr_int("axis")}}));
}

int64_t reduction_flops(const CostArgs& a) { return a.in_elems(0); }
int64_t matmul_flops(const CostArgs& a) { return 2 * a.out_elems() * a.in[0].back(); }
int64_t scatter_add_flops(const CostArgs& a) { return a.in_elems(2); }

}  // namespace

std::vector<OpDef> structure() {
  const AttrSpec keepdim{"keepdim", AK::Bool, AttrValue(false)};
  const std::vector<AttrSpec> reduce_attrs = {{"axes", AK::Ints, std::nullopt}, keepdim};
  return {
      {.op = Op::input, .name = "input", .category = Cat::source, .min_inputs = 0, .max_inputs = 0},
      {.op = Op::param, .name = "param", .category = Cat::source, .min_inputs = 0, .max_inputs = 0},
      {.op = Op::constant, .name = "const", .category = Cat::source, .min_inputs = 0, .max_inputs = 0,
       .attrs = {{"value", AK::Data, std::nullopt}}},
      {.op = Op::iota, .name = "iota", .category = Cat::source, .min_inputs = 0, .max_inputs = 0,
       .attrs = {{"n", AK::DimK, std::nullopt}, {"dtype", AK::DTypeK, AttrValue(DType::i64)}}, .infer = infer_iota,
       .fuse = Fuse::generator, .flops = 0},

      {.op = Op::sum, .name = "sum", .category = Cat::reduction, .min_inputs = 1, .max_inputs = 1, .attrs = reduce_attrs, .infer = infer_reduce,
       .fuse = Fuse::reduction, .flops_fn = reduction_flops, .grad = d_sum, .factors = reduce_factors},
      {.op = Op::amax, .name = "amax", .category = Cat::reduction, .min_inputs = 1, .max_inputs = 1, .attrs = reduce_attrs, .infer = infer_reduce,
       .fuse = Fuse::reduction, .flops_fn = reduction_flops, .grad = d_amax, .factors = reduce_factors},
      {.op = Op::mean, .name = "mean", .category = Cat::reduction, .min_inputs = 1, .max_inputs = 1, .attrs = reduce_attrs, .infer = infer_reduce,
       .fuse = Fuse::reduction, .flops_fn = reduction_flops, .grad = d_mean, .factors = reduce_factors},
      {.op = Op::prod, .name = "prod", .category = Cat::reduction, .min_inputs = 1, .max_inputs = 1, .attrs = reduce_attrs, .infer = infer_reduce,
       .fuse = Fuse::reduction, .flops_fn = reduction_flops, .factors = reduce_factors},
      {.op = Op::argmax, .name = "argmax", .category = Cat::reduction, .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"axis", AK::Int, std::nullopt}, keepdim}, .infer = infer_argmax,
       .fuse = Fuse::lower, .flops = 3,
       .decompose = decompose_argmax},

      {.op = Op::matmul, .name = "matmul", .category = Cat::matmul, .min_inputs = 2, .max_inputs = 2, .infer = infer_matmul,
       .fuse = Fuse::matmul, .flops_fn = matmul_flops, .grad = d_matmul, .factors = matmul_factors},

      {.op = Op::reshape, .name = "reshape", .category = Cat::view, .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"shape", AK::Dims, std::nullopt}}, .infer = infer_reshape,
       .fuse = Fuse::view, .flops = 0, .grad = d_reshape, .factors = reshape_factors},
      {.op = Op::permute, .name = "permute", .category = Cat::view, .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"perm", AK::Ints, std::nullopt}}, .infer = infer_permute,
       .fuse = Fuse::view, .flops = 0, .grad = d_permute, .factors = permute_factors},
      {.op = Op::expand, .name = "expand", .category = Cat::view, .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"shape", AK::Dims, std::nullopt}}, .infer = infer_expand,
       .fuse = Fuse::view, .flops = 0, .grad = d_expand, .factors = expand_factors},
      {.op = Op::slice, .name = "slice", .category = Cat::view, .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"axis", AK::Int, std::nullopt}, {"start", AK::DimK, std::nullopt}, {"end", AK::DimK, std::nullopt},
                 {"step", AK::Int, AttrValue(int64_t{1})}},
       .infer = infer_slice,
       .fuse = Fuse::view, .flops = 0, .grad = d_slice, .factors = axis_factors},
      {.op = Op::squeeze, .name = "squeeze", .category = Cat::view, .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"axes", AK::Ints, std::nullopt}}, .infer = infer_squeeze,
       .fuse = Fuse::view, .flops = 0, .grad = d_reshape, .factors = squeeze_factors},
      {.op = Op::unsqueeze, .name = "unsqueeze", .category = Cat::view, .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"axes", AK::Ints, std::nullopt}}, .infer = infer_unsqueeze,
       .fuse = Fuse::view, .flops = 0, .grad = d_reshape, .factors = unsqueeze_factors},

      {.op = Op::concat, .name = "concat", .category = Cat::movement, .min_inputs = 1, .max_inputs = -1,
       .attrs = {{"axis", AK::Int, std::nullopt}}, .infer = infer_concat,
       .fuse = Fuse::store, .flops = 0, .grad = d_concat, .factors = axis_factors},
      {.op = Op::gather, .name = "gather", .category = Cat::movement, .min_inputs = 2, .max_inputs = 2,
       .attrs = {{"axis", AK::Int, AttrValue(int64_t{0})}}, .infer = infer_gather,
       .fuse = Fuse::gather, .flops = 0, .grad = d_gather},
      // scatter_add(base, indices, updates): base with each update slice
      // added at its index along the axis, in the indices' order (floats).
      {.op = Op::scatter_add, .name = "scatter_add", .category = Cat::movement, .min_inputs = 3, .max_inputs = 3,
       .attrs = {{"axis", AK::Int, AttrValue(int64_t{0})}}, .infer = infer_scatter_add,
       .fuse = Fuse::store, .flops_fn = scatter_add_flops, .grad = d_scatter_add},
  };
}

}  // namespace tj::rows
