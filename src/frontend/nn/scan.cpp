// Scans and sorting over the IR's ops (tensorjit/nn.h): cumulative sums
// and products, stable sorts and top-k.
#include <cmath>
#include <optional>

#include "frontend/nn/common.h"

namespace tj {

using namespace nn_detail;

// A product with a triangular matrix of ones: sum_j x[j] m[j][i], m[j][i]
// = 1 where j is counted for i. Integers (matmul is for floats): each row
// times the mask's columns, summed, exact and wrapping.
Tensor cumsum(const Tensor& x, int64_t axis_, bool exclusive, bool reverse) {
  const char* op = "cumsum";
  if (x.rank() == 0) return exclusive ? x * 0.0 : x;
  if (x.dtype() == DType::boolean) fail(op, "a cumulative sum of bool (cast it to an integer first)");
  int64_t axis = axis_of(op, axis_, x.rank());
  const Dim n = x.shape()[static_cast<size_t>(axis)];
  Tensor j = reshape(iota(x, n), {n, Dim(1)}), i = reshape(iota(x, n), {Dim(1), n});
  Tensor counted = reverse ? (exclusive ? j > i : j >= i) : (exclusive ? j < i : j <= i);
  Tensor m = cast(counted, x.dtype());
  Moved mv = move_last(x, axis);
  Tensor rows = mv.x;
  Tensor r = is_float(x.dtype()) ? (rows.rank() == 1 ? squeeze(matmul(unsqueeze(rows, {0}), m), {0}) : matmul(rows, m))
                                 : sum(unsqueeze(rows, {rows.rank()}) * m, {rows.rank() - 1});
  return move_back(mv, r);
}

// log2(n) rounds of x[i] *= x[i - s] (s = 1, 2, 4, ..): every product in
// the same order of pairs whatever the values.
Tensor cumprod(const Tensor& x, int64_t axis_) {
  const char* op = "cumprod";
  if (x.rank() == 0) return x;
  if (x.dtype() == DType::boolean) fail(op, "a cumulative product of bool (cast it to an integer first)");
  int64_t axis = axis_of(op, axis_, x.rank());
  int64_t n = static_dim(op, x, axis);
  Tensor r = x;
  for (int64_t s = 1; s < n; s *= 2) {
    Shape ones = r.shape();
    ones[static_cast<size_t>(axis)] = Dim(s);
    Tensor shifted = concat({expand(x.tracer()->scalar(1, x.dtype()), ones), slice(r, axis, Dim(0), Dim(n - s))}, axis);
    r = r * shifted;
  }
  return r;
}

namespace {

// Whether b sorts strictly before a (ascending: smaller; descending:
// larger), NaN counting as the largest value.
Tensor before(const Tensor& b, const Tensor& a, bool descending) {
  Tensor strict = descending ? gt(b, a) : lt(b, a);
  if (!is_float(a.dtype())) return strict;
  Tensor nan_a = ne(a, a), nan_b = ne(b, b);
  return descending ? logical_or(strict, logical_and(nan_b, logical_not(nan_a))) : logical_or(strict, logical_and(nan_a, logical_not(nan_b)));
}

Tensor same(const Tensor& b, const Tensor& a) {
  Tensor e = eq(b, a);
  return is_float(a.dtype()) ? logical_or(e, logical_and(ne(a, a), ne(b, b))) : e;
}

constexpr int64_t kMaxSort = 4096;  // the rank of each element is counted against every other: n^2 work

}  // namespace

// Each element's place is the count of elements that sort before it
// (ties: the lower index first); output place r takes the element whose
// place is r.
ValuesAndIndices sort(const Tensor& x, int64_t axis_, bool descending) {
  const char* op = "sort";
  if (x.rank() == 0) return {x, x.tracer()->scalar(0, DType::i64)};
  int64_t axis = axis_of(op, axis_, x.rank());
  const Dim n = x.shape()[static_cast<size_t>(axis)];
  if (auto k = n.as_const(); k && *k > kMaxSort)
    unsupported(op, "sorting " + std::to_string(*k) + " elements (at most " + std::to_string(kMaxSort) + ": the sort counts places in n^2 steps)");
  Moved mv = move_last(x, axis);
  const Tensor& xs = mv.x;
  int64_t last = xs.rank() - 1;
  Tensor a = unsqueeze(xs, {last + 1}), b = unsqueeze(xs, {last});  // a: element i [.., n, 1]; b: element j [.., 1, n]
  Tensor ii = reshape(iota(x, n), {n, Dim(1)}), jj = reshape(iota(x, n), {Dim(1), n});
  Tensor counts = logical_or(before(b, a, descending), logical_and(same(b, a), lt(jj, ii)));
  Tensor place = sum(cast(counts, DType::i64), {last + 1});  // [.., n]: element i's place
  // onehot[.., r, i] = place[.., i] == r; the index at place r is sum_i onehot * i.
  Tensor onehot = eq(unsqueeze(place, {last}), reshape(iota(x, n), {n, Dim(1)}));
  Tensor idx = sum(where(onehot, reshape(iota(x, n), {Dim(1), n}), x.tracer()->scalar(0, DType::i64)), {last + 1});
  Tensor values = take_along(xs, idx, last);
  return {move_back(mv, values), move_back(mv, idx)};
}

// k <= 256: k rounds of argmax, each masking out what it took; larger k:
// the first k of the sort.
ValuesAndIndices topk(const Tensor& x, int64_t k, int64_t axis_, bool largest) {
  const char* op = "topk";
  if (x.rank() == 0) {
    if (k > 1 || k < 0) fail(op, "k = " + std::to_string(k) + " of a scalar");
    return {x, x.tracer()->scalar(0, DType::i64)};
  }
  int64_t axis = axis_of(op, axis_, x.rank());
  int64_t n = static_dim(op, x, axis);
  if (k < 0 || k > n) fail(op, "k = " + std::to_string(k) + " for a dim of " + std::to_string(n));
  if (k == 0) return {slice(x, axis, Dim(0), Dim(0)), cast(slice(x, axis, Dim(0), Dim(0)), DType::i64)};
  if (k > 256) {
    ValuesAndIndices s = sort(x, axis, largest);
    return {slice(s.values, axis, Dim(0), Dim(k)), slice(s.indices, axis, Dim(0), Dim(k))};
  }
  Tensor key = largest ? x : (is_float(x.dtype()) ? neg(x) : -1.0 - x);
  const DType kd = key.dtype();
  Tensor floor_ = x.tracer()->scalar(lowest(kd), kd);
  Shape s(static_cast<size_t>(x.rank()), Dim(1));
  s[static_cast<size_t>(axis)] = Dim(n);
  Tensor pos = reshape(iota(x, Dim(n)), s);
  std::vector<Tensor> vals, idxs;
  std::optional<Tensor> taken;  // positions already taken
  for (int64_t i = 0; i < k; ++i) {
    // NaN counts as the largest (argmax's rule); the lowest value is then a
    // valid pick, so what is taken is masked by position, not by value alone.
    Tensor masked = taken ? where(*taken, floor_, key) : key;
    Tensor idx = argmax(masked, axis, true);
    if (taken) {  // a row at the floor after masking: the first position not taken
      Tensor free_ = logical_not(*taken);
      Tensor best = take_along(masked, idx, axis);
      Tensor at_floor = eq(best, floor_);
      idx = where(logical_and(at_floor, logical_not(take_along(free_, idx, axis))), argmax(cast(free_, DType::i32), axis, true), idx);
    }
    idxs.push_back(idx);
    vals.push_back(take_along(x, idx, axis));
    Tensor hit = eq(pos, idx);
    taken = taken ? logical_or(*taken, hit) : hit;
  }
  return {vals.size() == 1 ? vals[0] : concat(vals, axis), idxs.size() == 1 ? idxs[0] : concat(idxs, axis)};
}

}  // namespace tj
