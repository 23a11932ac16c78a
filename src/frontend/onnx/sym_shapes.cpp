// Shape arithmetic over symbolic dims, at import. Exported graphs compute
// shapes at run time (Shape -> Gather -> Unsqueeze -> Concat -> Reshape,
// Equal/Where over shapes, ConstantOfShape); with dim_param inputs those
// shapes hold size symbols. Here they are computed as dims, as ONNX Runtime
// and TVM do, so that Reshape, Expand, Range, Slice and ConstantOfShape get
// symbolic shapes and the graph that reaches the passes does no shape
// arithmetic. Ops that read a shape as data (a Mul with activations) get
// its run-time value (dims_value).
#include <algorithm>
#include <set>

#include "frontend/onnx/context.h"

namespace tj::onnx_import {

namespace {

bool symbolic(const std::vector<Dim>& d) {
  return std::any_of(d.begin(), d.end(), [](const Dim& x) { return !x.as_const(); });
}

// A value as dims: its dims, or its known integers (rank 0 or 1).
std::optional<std::vector<Dim>> dims_of(const Value& v) {
  if (v.dims) return v.dims;
  if (!v.known || !is_int(v.known->dtype()) || v.known->shape().size() > 1) return std::nullopt;
  std::vector<Dim> r;
  for (int64_t k = 0; k < v.known->numel(); ++k)
    r.push_back(Dim(v.known->dtype() == DType::i64 ? v.known->data<int64_t>()[k] : v.known->data<int32_t>()[k]));
  return r;
}

// Equal on dims: decided when both are static, when they are the same
// expression, or for a symbol against a negative number (sizes are >= 0).
std::optional<bool> dims_equal(const Dim& a, const Dim& b) {
  if (a == b) return true;
  auto ka = a.as_const(), kb = b.as_const();
  if (ka && kb) return *ka == *kb;
  if ((ka && *ka < 0 && !kb) || (kb && *kb < 0 && !ka)) return false;
  return std::nullopt;
}

using Dims = std::vector<Dim>;
using Sym = std::optional<std::vector<Value>>;

Sym one(Ctx& c, Dims d, bool scalar) { return std::vector<Value>{dims_value(c, std::move(d), scalar)}; }

// Elementwise over two dims operands (a scalar broadcasts).
template <class F>
std::optional<Dims> zip(const Dims& a, const Dims& b, F f) {
  if (a.size() != b.size() && a.size() != 1 && b.size() != 1) return std::nullopt;
  Dims r;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    auto x = f(a[a.size() == 1 ? 0 : i], b[b.size() == 1 ? 0 : i]);
    if (!x) return std::nullopt;
    r.push_back(*x);
  }
  return r;
}

}  // namespace

Value dims_value(Ctx& c, std::vector<Dim> dims, bool scalar) {
  Value v;
  if (!symbolic(dims)) {
    std::vector<int64_t> k;
    for (const Dim& d : dims) k.push_back(*d.as_const());
    NDArray a = scalar ? NDArray::of<int64_t>({}, k) : NDArray::of<int64_t>({static_cast<int64_t>(k.size())}, k);
    v.t = c.tracer.constant(a);
    v.known = std::move(a);
  } else {
    // At run time: a symbolic dim d is the element count of [d].
    std::vector<Tensor> parts;
    for (const Dim& d : dims) {
      Tensor e = d.as_const() ? c.scalar(static_cast<double>(*d.as_const()), DType::i64)
                              : sum(expand(c.scalar(1, DType::i64), {d}), {0});
      parts.push_back(scalar ? e : reshape(e, {Dim(1)}));
    }
    v.t = scalar ? parts.at(0) : parts.size() == 1 ? parts[0] : concat(parts, 0);
  }
  v.dims = std::move(dims);
  return v;
}

std::optional<std::vector<Value>> eval_symbolic(Ctx& c) {
  const onnx::NodeProto& n = *c.node;
  bool any = false;
  for (int i = 0; i < n.input_size(); ++i)
    if (c.has_input(static_cast<size_t>(i))) {
      const Value& v = c.input(static_cast<size_t>(i));
      any |= v.dims && symbolic(*v.dims);
    }
  if (!any) return std::nullopt;
  const std::string& op = n.op_type();
  auto in = [&](size_t i) { return dims_of(c.input(i)); };
  auto rank = [&](size_t i) { return c.in(i).rank(); };
  // Ops that rearrange operand 0 do so as shapes only when it is one.
  static const std::set<std::string> of_operand0 = {"Identity", "Cast", "Gather", "Unsqueeze", "Squeeze", "Reshape", "Slice"};
  if (of_operand0.count(op) && !in(0)) return std::nullopt;
  if (op == "Identity") return one(c, *in(0), rank(0) == 0);
  if (op == "Cast") {  // dims stay dims in any numeric type (torch.arange(float(n)))
    DType to = dtype_of_onnx(static_cast<int32_t>(c.attr_int("to", 0)), "Cast");
    if (to == DType::boolean) return std::nullopt;  // read as data
    Value r = dims_value(c, *in(0), rank(0) == 0);
    if (to != DType::i64) {
      r.t = cast(r.t, to);
      if (r.known) {
        NDArray k(to, r.known->shape());
        for (int64_t i = 0; i < k.numel(); ++i) k.set(i, r.known->get(i));
        r.known = std::move(k);
      }
    }
    return std::vector<Value>{std::move(r)};
  }
  if (op == "Gather") {
    auto d = in(0);
    if (!d || rank(0) != 1 || !c.input(1).known || !is_int(c.input(1).known->dtype()) || c.input(1).known->shape().size() > 1) return std::nullopt;
    Dims r;
    for (int64_t k : c.known_ints(1, "the indices")) {
      int64_t n_ = static_cast<int64_t>(d->size());
      if (k < -n_ || k >= n_) c.fail("index " + std::to_string(k) + " out of range for a shape of " + std::to_string(n_));
      r.push_back((*d)[static_cast<size_t>(k < 0 ? k + n_ : k)]);
    }
    return one(c, r, rank(1) == 0);
  }
  if (op == "Unsqueeze" && rank(0) == 0) return one(c, *in(0), false);
  if (op == "Squeeze" && rank(0) == 1 && in(0)->size() == 1) return one(c, *in(0), true);
  if (op == "Reshape" && rank(0) <= 1) {
    std::vector<int64_t> to = c.known_ints(1, "the shape");
    if (to.size() == 1 && (to[0] == -1 || to[0] == static_cast<int64_t>(in(0)->size()))) return one(c, *in(0), false);
    if (to.empty() && in(0)->size() == 1) return one(c, *in(0), true);
    return std::nullopt;
  }
  if (op == "Concat") {
    Dims r;
    for (int i = 0; i < n.input_size(); ++i) {
      auto d = in(static_cast<size_t>(i));
      if (!d || rank(static_cast<size_t>(i)) != 1) return std::nullopt;
      r.insert(r.end(), d->begin(), d->end());
    }
    return one(c, r, false);
  }
  if (op == "Slice" && rank(0) == 1) {
    std::vector<int64_t> s = c.known_ints(1, "the starts"), e = c.known_ints(2, "the ends");
    if (s.size() != 1 || e.size() != 1) return std::nullopt;
    if (c.has_input(4) && c.known_ints(4, "the steps") != std::vector<int64_t>{1}) return std::nullopt;
    Dims d = *in(0);
    int64_t n_ = static_cast<int64_t>(d.size());
    int64_t b = s[0] < 0 ? std::max<int64_t>(s[0], -n_) + n_ : std::min(s[0], n_);
    int64_t end = e[0] < 0 ? std::max<int64_t>(e[0], -n_) + n_ : std::min(e[0], n_);
    return one(c, Dims(d.begin() + b, d.begin() + std::max(b, end)), false);
  }
  if (op == "Add" || op == "Sub" || op == "Mul") {
    auto a = in(0), b = in(1);
    if (!a || !b) return std::nullopt;
    auto r = zip(*a, *b, [&](const Dim& x, const Dim& y) -> std::optional<Dim> { return op == "Add" ? x + y : op == "Sub" ? x - y : x * y; });
    if (!r) return std::nullopt;
    return one(c, *r, rank(0) == 0 && rank(1) == 0);
  }
  if (op == "Div") {
    auto a = in(0), b = in(1);
    if (!a || !b) return std::nullopt;
    auto r = zip(*a, *b, [](const Dim& x, const Dim& y) -> std::optional<Dim> {
      auto k = y.as_const();
      if (!k || *k <= 0) return std::nullopt;
      return x.div_exact(y);  // a shape split evenly (heads); else read as data
    });
    if (!r) return std::nullopt;
    return one(c, *r, rank(0) == 0 && rank(1) == 0);
  }
  if (op == "Equal") {
    auto a = in(0), b = in(1);
    if (!a || !b) return std::nullopt;
    std::vector<uint8_t> eq;
    bool decided = true;
    zip(*a, *b, [&](const Dim& x, const Dim& y) -> std::optional<Dim> {
      auto e = dims_equal(x, y);
      decided &= e.has_value();
      eq.push_back(e.value_or(false));
      return Dim(0);
    });
    if (!decided) return std::nullopt;
    bool scalar = rank(0) == 0 && rank(1) == 0;
    NDArray r(DType::boolean, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(eq.size())});
    for (size_t i = 0; i < eq.size(); ++i) r.data<uint8_t>()[i] = eq[i];
    return std::vector<Value>{{c.tracer.constant(r), r, std::nullopt}};
  }
  if (op == "Where") {
    const Value& cond = c.input(0);
    auto a = in(1), b = in(2);
    if (!cond.known || !a || !b || cond.known->shape().size() > 1) return std::nullopt;
    const NDArray& k = *cond.known;
    size_t len = std::max({static_cast<size_t>(k.numel()), a->size(), b->size()});
    Dims r;
    for (size_t i = 0; i < len; ++i) {
      bool pick = k.get(k.numel() == 1 ? 0 : static_cast<int64_t>(i)) != 0;
      const Dims& src = pick ? *a : *b;
      if (src.size() != 1 && src.size() != len) return std::nullopt;
      r.push_back(src[src.size() == 1 ? 0 : i]);
    }
    return one(c, r, k.shape().empty() && rank(1) == 0 && rank(2) == 0);
  }
  return std::nullopt;
}

}  // namespace tj::onnx_import
