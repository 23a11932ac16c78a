#include "ir/factors.h"

#include <algorithm>
#include <numeric>

namespace tj {

namespace {

using Kind = FactorRule::Kind;

std::vector<int> none(size_t rank) { return std::vector<int>(rank, -1); }

// Operand `s` right-aligned against result dims `r` (numpy broadcasting): a
// dim of 1 against a larger one is broadcast, no factor.
std::vector<int> aligned(const Shape& s, const Shape& r, const std::vector<int>& result_factors) {
  std::vector<int> f = none(s.size());
  for (size_t d = 0; d < s.size(); ++d) {
    const size_t rd = r.size() - s.size() + d;
    if (s[d] == r[rd]) f[d] = result_factors[rd];
  }
  return f;
}

// The reduction that completes a partial result of op `op`, or nullopt where
// partial results do not combine by one (a mean needs the count, a product
// its own all-reduce, not built).
std::optional<Reduction> partial_reduction(Op op) {
  switch (op) {
    case Op::sum: return Reduction::sum;
    case Op::amax: return Reduction::max;
    default: return std::nullopt;
  }
}

}  // namespace

int FactorRule::add(Kind kind, const Dim& size, Reduction r) {
  factors.push_back({kind, r, size});
  return static_cast<int>(factors.size()) - 1;
}

std::string FactorRule::str() const {
  auto name = [](int f) { return f < 0 ? std::string("_") : std::string(1, static_cast<char>('a' + f % 26)) + (f >= 26 ? std::to_string(f / 26) : ""); };
  auto dims = [&](const std::vector<int>& fs) {
    std::string s = "(";
    for (size_t i = 0; i < fs.size(); ++i) s += (i ? "," : "") + name(fs[i]);
    return s + ")";
  };
  std::string s;
  for (size_t o = 0; o < operands.size(); ++o) s += (o ? "," : "") + dims(operands[o]);
  s += "->" + dims(result);
  for (size_t f = 0; f < factors.size(); ++f) {
    if (factors[f].kind == Kind::reduce) s += " " + name(static_cast<int>(f)) + ":" + reduction_name(factors[f].reduction);
    if (factors[f].kind == Kind::replicate) s += " " + name(static_cast<int>(f)) + ":whole";
  }
  return s;
}

FactorRule pointwise_factors(const Node& n, const std::vector<Type>& in) {
  FactorRule r;
  for (const Dim& d : n.type.shape) r.result.push_back(r.add(Kind::pass, d));
  for (const Type& t : in) r.operands.push_back(aligned(t.shape, n.type.shape, r.result));
  return r;
}

FactorRule reduce_factors(const Node& n, const std::vector<Type>& in) {
  FactorRule r;
  const std::vector<int64_t>& axes = n.attr_ints("axes");
  const bool keep = n.attr_bool("keepdim");
  const std::optional<Reduction> red = partial_reduction(n.op);
  std::vector<int> x;
  for (size_t d = 0; d < in[0].shape.size(); ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
    const int f = r.add(!reduced ? Kind::pass : red ? Kind::reduce : Kind::replicate, in[0].shape[d], red.value_or(Reduction::sum));
    x.push_back(f);
    if (!reduced) r.result.push_back(f);
    else if (keep) r.result.push_back(-1);
  }
  r.operands = {x};
  return r;
}

FactorRule matmul_factors(const Node& n, const std::vector<Type>& in) {
  FactorRule r;
  const Shape &a = in[0].shape, &b = in[1].shape, &out = n.type.shape;
  const size_t batch = out.size() - 2;
  for (size_t d = 0; d < batch; ++d) r.result.push_back(r.add(Kind::pass, out[d]));
  const int m = r.add(Kind::pass, a[a.size() - 2]), k = r.add(Kind::reduce, a.back()), j = r.add(Kind::pass, b.back());
  r.result.push_back(m), r.result.push_back(j);
  const std::vector<int> batch_factors(r.result.begin(), r.result.begin() + static_cast<std::ptrdiff_t>(batch));
  const Shape out_batch(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(batch));
  std::vector<int> fa = aligned(Shape(a.begin(), a.end() - 2), out_batch, batch_factors);
  std::vector<int> fb = aligned(Shape(b.begin(), b.end() - 2), out_batch, batch_factors);
  fa.push_back(m), fa.push_back(k);
  fb.push_back(k), fb.push_back(j);
  r.operands = {fa, fb};
  return r;
}

FactorRule permute_factors(const Node& n, const std::vector<Type>& in) {
  FactorRule r;
  std::vector<int> x;
  for (const Dim& d : in[0].shape) x.push_back(r.add(Kind::pass, d));
  for (int64_t p : n.attr_ints("perm")) r.result.push_back(x[static_cast<size_t>(p)]);
  r.operands = {x};
  return r;
}

// Dims equal on both sides are one factor each. Otherwise runs of dims of
// equal products (128 -> 8,16; 8,16 -> 128; 6,4 -> 4,6) are cut into blocks
// alike on both sides when the major dims are: their major dims share a
// factor of gcd(majors) (splitting either by n, n dividing it, gives each
// device the same contiguous run of the flattened elements); the other
// dims of the run are whole. Dims of 1 are no factor; a run of symbolic
// dims that differ, and everything after it, is whole.
FactorRule reshape_factors(const Node& n, const std::vector<Type>& in) {
  FactorRule r;
  const Shape &a = in[0].shape, &b = n.type.shape;
  std::vector<int> x = none(a.size());
  r.result = none(b.size());
  size_t i = 0, j = 0;
  bool matched = true;  // false: a run that does not close; it and the rest are whole
  while (matched && i < a.size() && j < b.size()) {
    if (a[i] == Dim(1)) {
      ++i;
      continue;
    }
    if (b[j] == Dim(1)) {
      ++j;
      continue;
    }
    if (a[i] == b[j]) {
      x[i] = r.result[j] = r.add(Kind::pass, a[i]);
      ++i, ++j;
      continue;
    }
    auto ca = a[i].as_const(), cb = b[j].as_const();
    if (!ca || !cb || *ca <= 0 || *cb <= 0) break;
    const size_t i0 = i, j0 = j;
    int64_t pa = *ca, pb = *cb;
    while (matched && pa != pb) {
      if (pa < pb) {
        matched = ++i < a.size() && a[i].as_const();
        if (matched) pa *= *a[i].as_const();
      } else {
        matched = ++j < b.size() && b[j].as_const();
        if (matched) pb *= *b[j].as_const();
      }
    }
    if (!matched) break;
    x[i0] = r.result[j0] = r.add(Kind::pass, Dim(std::gcd(*ca, *cb)));
    for (size_t k = i0 + 1; k <= i; ++k) x[k] = r.add(Kind::replicate, a[k]);
    for (size_t k = j0 + 1; k <= j; ++k) r.result[k] = r.add(Kind::replicate, b[k]);
    ++i, ++j;
  }
  // Dims past the matched runs: whole.
  for (size_t k = 0; k < a.size(); ++k)
    if (x[k] < 0 && a[k] != Dim(1)) x[k] = r.add(Kind::replicate, a[k]);
  for (size_t k = 0; k < b.size(); ++k)
    if (r.result[k] < 0 && b[k] != Dim(1)) r.result[k] = r.add(Kind::replicate, b[k]);
  r.operands = {x};
  return r;
}

FactorRule unsqueeze_factors(const Node& n, const std::vector<Type>& in) {
  FactorRule r;
  const std::vector<int64_t>& axes = n.attr_ints("axes");
  std::vector<int> x;
  for (const Dim& d : in[0].shape) x.push_back(r.add(Kind::pass, d));
  size_t next = 0;
  for (size_t d = 0; d < n.type.shape.size(); ++d)
    r.result.push_back(std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end() ? -1 : x[next++]);
  r.operands = {x};
  return r;
}

FactorRule squeeze_factors(const Node& n, const std::vector<Type>& in) {
  FactorRule r;
  const std::vector<int64_t>& axes = n.attr_ints("axes");
  std::vector<int> x;
  for (size_t d = 0; d < in[0].shape.size(); ++d) {
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end()) {
      x.push_back(-1);
      continue;
    }
    x.push_back(r.add(Kind::pass, in[0].shape[d]));
    r.result.push_back(x.back());
  }
  r.operands = {x};
  return r;
}

FactorRule expand_factors(const Node& n, const std::vector<Type>& in) {
  FactorRule r;
  for (const Dim& d : n.type.shape) r.result.push_back(r.add(Kind::pass, d));
  r.operands = {aligned(in[0].shape, n.type.shape, r.result)};
  return r;
}

FactorRule last_axis_factors(const Node& n, const std::vector<Type>& in) {
  FactorRule r;
  const Shape& s = n.type.shape;
  for (size_t d = 0; d < s.size(); ++d) r.result.push_back(r.add(d + 1 == s.size() ? Kind::replicate : Kind::pass, s[d]));
  for (const Type& t : in) r.operands.push_back(aligned(t.shape, s, r.result));
  return r;
}

FactorRule axis_factors(const Node& n, const std::vector<Type>& in) {
  FactorRule r;
  const int64_t axis = n.attr_int("axis");
  const Shape& s = n.type.shape;
  for (size_t d = 0; d < s.size(); ++d) r.result.push_back(r.add(static_cast<int64_t>(d) == axis ? Kind::replicate : Kind::pass, s[d]));
  for (const Type& t : in) {
    std::vector<int> f = none(t.shape.size());
    for (size_t d = 0; d < t.shape.size() && d < s.size(); ++d)
      if (static_cast<int64_t>(d) == axis || t.shape[d] == s[d]) f[d] = r.result[d];
    r.operands.push_back(f);
  }
  return r;
}

FactorRule factor_rule(const Graph& g, ValueId v) {
  const Node& n = g.node(v);
  std::vector<Type> in;
  for (ValueId o : n.inputs) in.push_back(g.type(o));
  if (n.def().factors) return n.def().factors(n, in);
  if (n.def().fuse == Fuse::pointwise) return pointwise_factors(n, in);
  FactorRule r;
  for (const Type& t : in) {
    r.operands.emplace_back();
    for (const Dim& d : t.shape) r.operands.back().push_back(r.add(Kind::replicate, d));
  }
  for (const Dim& d : n.type.shape) r.result.push_back(r.add(Kind::replicate, d));
  return r;
}

}  // namespace tj
