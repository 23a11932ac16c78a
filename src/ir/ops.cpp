// The op table and each op's dtype/shape inference.
#include <algorithm>
#include <array>
#include <numeric>
#include <unordered_map>

#include "ir/graph.h"
#include "tensorjit/error.h"

namespace tj {

struct InferCtx {
  const OpDef& def;
  const std::vector<Type>& in;
  std::vector<AttrValue>& attrs;

  [[noreturn]] void fail(const std::string& msg) const { throw ShapeError(msg); }
  template <class T>
  T& attr(std::string_view name) {
    return std::get<T>(attrs[static_cast<size_t>(attr_index(def, name))]);
  }
  int rank(size_t i) const { return in[i].rank(); }
  // Normalizes a possibly negative axis into [0, rank).
  int64_t axis(int64_t a, int rank) const {
    if (a < -rank || a >= rank) fail("axis " + std::to_string(a) + " out of range for rank " + std::to_string(rank));
    return a < 0 ? a + rank : a;
  }
};

namespace {

using AK = AttrKind;
using Cat = OpCategory;

void require_float(const InferCtx& c, size_t i) {
  if (!is_float(c.in[i].dtype))
    c.fail("operand " + std::to_string(i) + " must be floating point, got " + std::string(dtype_name(c.in[i].dtype)));
}

void require_int_scalar(const InferCtx& c, size_t i, const char* what) {
  if (!is_int(c.in[i].dtype) || c.in[i].rank() != 0)
    c.fail(std::string(what) + " must be an integer scalar, got " + c.in[i].str());
}

void require_same_dtype(const InferCtx& c) {
  for (size_t i = 1; i < c.in.size(); ++i)
    if (c.in[i].dtype != c.in[0].dtype)
      c.fail("operand dtypes differ: " + std::string(dtype_name(c.in[0].dtype)) + " vs " +
             std::string(dtype_name(c.in[i].dtype)));
}

// numpy broadcasting; a symbolic dim broadcasts only against itself or 1.
Shape broadcast(const InferCtx& c, const std::vector<const Shape*>& shapes) {
  size_t r = 0;
  for (auto* s : shapes) r = std::max(r, s->size());
  Shape out(r, Dim(1));
  for (auto* s : shapes) {
    size_t off = r - s->size();
    for (size_t i = 0; i < s->size(); ++i) {
      const Dim& d = (*s)[i];
      Dim& o = out[off + i];
      if (d == Dim(1) || d == o) continue;
      if (o == Dim(1)) {
        o = d;
        continue;
      }
      c.fail("cannot broadcast dimension " + d.str() + " against " + o.str());
    }
  }
  return out;
}

Type infer_float_unary(InferCtx& c) {
  require_float(c, 0);
  return c.in[0];
}

Type infer_numeric_unary(InferCtx& c) {
  if (c.in[0].dtype == DType::boolean) c.fail("operand must be numeric, got bool");
  return c.in[0];
}

Type infer_cast(InferCtx& c) { return {c.attr<DType>("to"), c.in[0].shape}; }

Type infer_binary(InferCtx& c) {
  require_same_dtype(c);
  if (c.in[0].dtype == DType::boolean) c.fail("arithmetic on bool operands");
  return {c.in[0].dtype, broadcast(c, {&c.in[0].shape, &c.in[1].shape})};
}

Type infer_float_binary(InferCtx& c) {
  require_float(c, 0);
  return infer_binary(c);
}

Type infer_compare(InferCtx& c) {
  require_same_dtype(c);
  return {DType::boolean, broadcast(c, {&c.in[0].shape, &c.in[1].shape})};
}

Type infer_where(InferCtx& c) {
  if (c.in[0].dtype != DType::boolean) c.fail("condition must be bool, got " + c.in[0].str());
  if (c.in[1].dtype != c.in[2].dtype) c.fail("branch dtypes differ: " + c.in[1].str() + " vs " + c.in[2].str());
  return {c.in[1].dtype, broadcast(c, {&c.in[0].shape, &c.in[1].shape, &c.in[2].shape})};
}

Type infer_reduce(InferCtx& c) {
  auto& axes = c.attr<std::vector<int64_t>>("axes");
  int r = c.rank(0);
  for (auto& a : axes) a = c.axis(a, r);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) c.fail("repeated reduction axis");
  if (c.in[0].dtype == DType::boolean) c.fail("reduction of bool");
  if (c.def.op == Op::mean) require_float(c, 0);
  bool keep = c.attr<bool>("keepdim");
  Shape out;
  for (int i = 0; i < r; ++i) {
    bool reduced = std::binary_search(axes.begin(), axes.end(), i);
    if (!reduced) out.push_back(c.in[0].shape[static_cast<size_t>(i)]);
    else if (keep) out.push_back(Dim(1));
  }
  return {c.in[0].dtype, out};
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

void check_dims_nonnegative(const InferCtx& c, const Shape& s) {
  for (const auto& d : s)
    if (auto v = d.as_const(); v && *v < 0) c.fail("negative dimension " + std::to_string(*v) + " in " + shape_str(s));
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

Type infer_softmax(InferCtx& c) {
  require_float(c, 0);
  auto& axis = c.attr<int64_t>("axis");
  axis = c.axis(axis, c.rank(0));
  return c.in[0];
}

Type infer_norm(InferCtx& c) {
  require_float(c, 0);
  require_same_dtype(c);
  if (c.rank(0) < 1) c.fail("normalization needs rank >= 1");
  for (size_t i = 1; i < c.in.size(); ++i)
    if (c.rank(i) != 1 || c.in[i].shape[0] != c.in[0].shape.back())
      c.fail("scale/bias " + c.in[i].str() + " does not match the last dimension of " + c.in[0].str());
  return c.in[0];
}

Type infer_iota(InferCtx& c) {
  DType t = c.attr<DType>("dtype");
  if (t == DType::boolean) c.fail("iota of bool");
  return {t, {c.attr<Dim>("n")}};
}

Type infer_causal_mask(InferCtx& c) {
  require_int_scalar(c, 0, "causal_mask offset");
  DType t = c.attr<DType>("dtype");
  if (!is_float(t)) c.fail("causal_mask dtype must be floating point");
  return {t, {c.attr<Dim>("q"), c.attr<Dim>("k")}};
}

Type infer_kv_write(InferCtx& c) {
  if (c.in[0].dtype != c.in[1].dtype) c.fail("cache and new rows differ in dtype");
  require_int_scalar(c, 2, "kv_write position");
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
  require_float(c, 0);
  if (k.dtype != q.dtype || v.dtype != q.dtype) c.fail("q, k, v dtypes differ");
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4) c.fail("q, k, v must be [batch, heads, len, head_dim]");
  if (q.shape[0] != k.shape[0] || k.shape[0] != v.shape[0]) c.fail("batch sizes differ");
  if (k.shape[1] != v.shape[1] || k.shape[2] != v.shape[2]) c.fail("k and v differ in heads or length");
  if (q.shape[3] != k.shape[3]) c.fail("q and k head dims differ: " + q.shape[3].str() + " vs " + k.shape[3].str());
  if (!q.shape[1].div_exact(k.shape[1])) c.fail("query heads " + q.shape[1].str() + " not a multiple of kv heads " + k.shape[1].str());
  bool causal = c.attr<bool>("causal");
  if (causal != (c.in.size() == 4)) c.fail("flash_attn takes an offset operand exactly when causal");
  if (causal) require_int_scalar(c, 3, "flash_attn offset");
  return {q.dtype, {q.shape[0], q.shape[1], q.shape[2], v.shape[3]}};
}

const std::vector<OpDef>& table() {
  static const std::vector<OpDef> t = [] {
    const std::vector<AttrSpec> none;
    const AttrSpec reduce_axes{"axes", AK::Ints, std::nullopt};
    const AttrSpec keepdim{"keepdim", AK::Bool, AttrValue(false)};
    const AttrSpec eps{"eps", AK::Float, AttrValue(1e-5)};
    std::vector<OpDef> v = {
        {Op::input, "input", Cat::source, 0, 0, none, nullptr},
        {Op::param, "param", Cat::source, 0, 0, none, nullptr},
        {Op::constant, "const", Cat::source, 0, 0, {{"value", AK::Data, std::nullopt}}, nullptr},
        {Op::iota, "iota", Cat::source, 0, 0, {{"n", AK::DimK, std::nullopt}, {"dtype", AK::DTypeK, AttrValue(DType::i64)}}, infer_iota},
        {Op::neg, "neg", Cat::elementwise, 1, 1, none, infer_numeric_unary},
        {Op::exp, "exp", Cat::elementwise, 1, 1, none, infer_float_unary},
        {Op::log, "log", Cat::elementwise, 1, 1, none, infer_float_unary},
        {Op::tanh, "tanh", Cat::elementwise, 1, 1, none, infer_float_unary},
        {Op::sqrt, "sqrt", Cat::elementwise, 1, 1, none, infer_float_unary},
        {Op::rsqrt, "rsqrt", Cat::elementwise, 1, 1, none, infer_float_unary},
        {Op::sin, "sin", Cat::elementwise, 1, 1, none, infer_float_unary},
        {Op::cos, "cos", Cat::elementwise, 1, 1, none, infer_float_unary},
        {Op::abs, "abs", Cat::elementwise, 1, 1, none, infer_numeric_unary},
        {Op::sigmoid, "sigmoid", Cat::elementwise, 1, 1, none, infer_float_unary},
        {Op::recip, "recip", Cat::elementwise, 1, 1, none, infer_float_unary},
        {Op::cast, "cast", Cat::elementwise, 1, 1, {{"to", AK::DTypeK, std::nullopt}}, infer_cast},
        {Op::add, "add", Cat::elementwise, 2, 2, none, infer_binary, true},
        {Op::sub, "sub", Cat::elementwise, 2, 2, none, infer_binary},
        {Op::mul, "mul", Cat::elementwise, 2, 2, none, infer_binary, true},
        {Op::div, "div", Cat::elementwise, 2, 2, none, infer_binary},
        {Op::max, "max", Cat::elementwise, 2, 2, none, infer_binary, true},
        {Op::min, "min", Cat::elementwise, 2, 2, none, infer_binary, true},
        {Op::pow, "pow", Cat::elementwise, 2, 2, none, infer_float_binary},
        {Op::eq, "eq", Cat::elementwise, 2, 2, none, infer_compare, true},
        {Op::ne, "ne", Cat::elementwise, 2, 2, none, infer_compare, true},
        {Op::lt, "lt", Cat::elementwise, 2, 2, none, infer_compare},
        {Op::le, "le", Cat::elementwise, 2, 2, none, infer_compare},
        {Op::gt, "gt", Cat::elementwise, 2, 2, none, infer_compare},
        {Op::ge, "ge", Cat::elementwise, 2, 2, none, infer_compare},
        {Op::where, "where", Cat::elementwise, 3, 3, none, infer_where},
        {Op::sum, "sum", Cat::reduction, 1, 1, {reduce_axes, keepdim}, infer_reduce},
        {Op::amax, "amax", Cat::reduction, 1, 1, {reduce_axes, keepdim}, infer_reduce},
        {Op::mean, "mean", Cat::reduction, 1, 1, {reduce_axes, keepdim}, infer_reduce},
        {Op::matmul, "matmul", Cat::matmul, 2, 2, none, infer_matmul},
        {Op::reshape, "reshape", Cat::view, 1, 1, {{"shape", AK::Dims, std::nullopt}}, infer_reshape},
        {Op::permute, "permute", Cat::view, 1, 1, {{"perm", AK::Ints, std::nullopt}}, infer_permute},
        {Op::expand, "expand", Cat::view, 1, 1, {{"shape", AK::Dims, std::nullopt}}, infer_expand},
        {Op::slice, "slice", Cat::view, 1, 1,
         {{"axis", AK::Int, std::nullopt}, {"start", AK::DimK, std::nullopt}, {"end", AK::DimK, std::nullopt},
          {"step", AK::Int, AttrValue(int64_t{1})}},
         infer_slice},
        {Op::squeeze, "squeeze", Cat::view, 1, 1, {{"axes", AK::Ints, std::nullopt}}, infer_squeeze},
        {Op::unsqueeze, "unsqueeze", Cat::view, 1, 1, {{"axes", AK::Ints, std::nullopt}}, infer_unsqueeze},
        {Op::concat, "concat", Cat::movement, 1, -1, {{"axis", AK::Int, std::nullopt}}, infer_concat},
        {Op::gather, "gather", Cat::movement, 2, 2, {{"axis", AK::Int, AttrValue(int64_t{0})}}, infer_gather},
        {Op::softmax, "softmax", Cat::composite, 1, 1, {{"axis", AK::Int, AttrValue(int64_t{-1})}}, infer_softmax},
        {Op::rms_norm, "rms_norm", Cat::composite, 2, 2, {eps}, infer_norm},
        {Op::layer_norm, "layer_norm", Cat::composite, 3, 3, {eps}, infer_norm},
        {Op::silu, "silu", Cat::composite, 1, 1, none, infer_float_unary},
        {Op::gelu, "gelu", Cat::composite, 1, 1, none, infer_float_unary},
        {Op::causal_mask, "causal_mask", Cat::special, 1, 1,
         {{"q", AK::DimK, std::nullopt}, {"k", AK::DimK, std::nullopt}, {"dtype", AK::DTypeK, AttrValue(DType::f32)}},
         infer_causal_mask},
        {Op::kv_write, "kv_write", Cat::special, 3, 3, {{"axis", AK::Int, AttrValue(int64_t{2})}}, infer_kv_write},
        {Op::flash_attn, "flash_attn", Cat::special, 3, 4,
         {{"scale", AK::Float, std::nullopt}, {"causal", AK::Bool, AttrValue(false)}}, infer_flash_attn},
        {Op::while_loop, "while_loop", Cat::control, 1, -1,
         {{"carried", AK::Int, std::nullopt}, {"cond", AK::RegionK, std::nullopt}, {"body", AK::RegionK, std::nullopt}}, infer_while_loop},
        {Op::cond, "cond", Cat::control, 1, -1, {{"then", AK::RegionK, std::nullopt}, {"else", AK::RegionK, std::nullopt}}, infer_cond},
        {Op::result, "result", Cat::control, 1, 1, {{"index", AK::Int, std::nullopt}}, infer_result},
    };
    for (size_t i = 0; i < v.size(); ++i)
      if (static_cast<size_t>(v[i].op) != i) throw std::logic_error("op table out of order at " + std::string(v[i].name));
    if (v.size() != static_cast<size_t>(Op::kNumOps)) throw std::logic_error("op table incomplete");
    return v;
  }();
  return t;
}

}  // namespace

std::string_view category_name(OpCategory c) {
  static constexpr std::array<std::string_view, 9> names = {"source", "elementwise", "reduction", "matmul", "view",
                                                            "movement", "composite", "special", "control"};
  return names[static_cast<size_t>(c)];
}

const OpDef& op_def(Op op) { return table()[static_cast<size_t>(op)]; }

std::optional<Op> op_by_name(std::string_view name) {
  static const auto index = [] {
    std::unordered_map<std::string_view, Op> m;
    for (const auto& d : table()) m.emplace(d.name, d.op);
    return m;
  }();
  auto it = index.find(name);
  if (it == index.end()) return std::nullopt;
  return it->second;
}

int attr_index(const OpDef& def, std::string_view name) {
  for (size_t i = 0; i < def.attrs.size(); ++i)
    if (name == def.attrs[i].name) return static_cast<int>(i);
  return -1;
}

Type infer_type(Op op, const std::vector<Type>& operand_types, std::vector<AttrValue>& attrs) {
  const OpDef& def = op_def(op);
  auto describe = [&] {
    std::string s = std::string(def.name) + "(";
    for (size_t i = 0; i < operand_types.size(); ++i) s += (i ? ", " : "") + operand_types[i].str();
    return s + ")";
  };
  int n = static_cast<int>(operand_types.size());
  if (n < def.min_inputs || (def.max_inputs >= 0 && n > def.max_inputs))
    throw ShapeError(describe() + ": wrong number of operands (" + std::to_string(n) + ")");
  if (!def.infer) throw ShapeError(describe() + ": type of a source op must be given");
  InferCtx ctx{def, operand_types, attrs};
  try {
    return def.infer(ctx);
  } catch (const ShapeError& e) {
    throw ShapeError(describe() + ": " + e.what());
  } catch (const std::bad_variant_access&) {
    throw ShapeError(describe() + ": attribute of the wrong kind");
  }
}

}  // namespace tj
