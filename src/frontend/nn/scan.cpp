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

constexpr int64_t kRankSort = 1024;    // up to here each element's place is counted against every other (n^2 work)
constexpr int64_t kMaxSort = 1 << 20;  // beyond, a bitonic network (log^2 n stages of compare-and-swap)

// A bitonic sorting network over the last axis of xs [.., n]: padded to a
// power of two with elements that sort after every real one, each stage a
// gather of every position's partner (i xor j, constants) and a
// compare-and-swap of (value, index) pairs, so equal values keep their
// order (stable) and NaN sorts as the largest.
// [1, .., 1, d] of `rank` dims: a vector along the last axis, broadcasting over the others.
Shape along_last(int64_t rank, Dim d) {
  Shape s(static_cast<size_t>(rank - 1), Dim(1));
  s.push_back(d);
  return s;
}

ValuesAndIndices bitonic(const Tensor& xs, int64_t n, bool descending) {
  int64_t last = xs.rank() - 1, size = 1;
  while (size < n) size *= 2;
  Shape row = xs.shape();
  row.back() = Dim(size - n);
  Tensor x = xs;
  Tensor idx = expand(reshape(iota(xs, Dim(n)), along_last(xs.rank(), Dim(n))), xs.shape());
  if (size > n) {
    x = concat({x, expand(xs.tracer()->scalar(0, xs.dtype()), row)}, last);
    idx = concat({idx, expand(reshape(iota(xs, Dim(size - n)), along_last(xs.rank(), Dim(size - n))), row) + static_cast<double>(n)}, last);
  }
  Tensor nn = xs.tracer()->scalar(static_cast<double>(n), DType::i64);
  // a strictly before b: a padding element never is; a real one is before padding; then by value, then by index.
  auto first = [&](const Tensor& a, const Tensor& ia, const Tensor& b, const Tensor& ib) {
    Tensor pad_a = ge(ia, nn), pad_b = ge(ib, nn);
    Tensor by_value = logical_or(before(a, b, descending), logical_and(same(a, b), lt(ia, ib)));
    return logical_and(logical_not(pad_a), logical_or(pad_b, by_value));
  };
  for (int64_t k = 2; k <= size; k *= 2)
    for (int64_t j = k / 2; j >= 1; j /= 2) {
      std::vector<int64_t> partner(static_cast<size_t>(size));
      std::vector<uint8_t> keep_min(static_cast<size_t>(size));
      for (int64_t i = 0; i < size; ++i) {
        int64_t p = i ^ j;
        partner[static_cast<size_t>(i)] = p;
        bool ascending = (i & k) == 0;
        keep_min[static_cast<size_t>(i)] = ascending == (i < p);  // this position takes the earlier of the pair
      }
      Tensor y = take_static(x, last, partner), iy = take_static(idx, last, partner);
      Tensor mine = first(x, idx, y, iy);
      Tensor want = reshape(xs.tracer()->constant(NDArray::of<uint8_t>({size}, keep_min)), along_last(xs.rank(), Dim(size)));
      Tensor keep = eq(cast(want, DType::boolean), mine);
      x = where(keep, x, y), idx = where(keep, idx, iy);
    }
  if (size > n) x = slice(x, last, Dim(0), Dim(n)), idx = slice(idx, last, Dim(0), Dim(n));
  return {x, idx};
}

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
    unsupported(op, "sorting " + std::to_string(*k) + " elements (at most " + std::to_string(kMaxSort) + ")");
  Moved mv = move_last(x, axis);
  if (auto k = n.as_const(); k && *k > kRankSort) {
    ValuesAndIndices r = bitonic(mv.x, *k, descending);
    return {move_back(mv, r.values), move_back(mv, r.indices)};
  }
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
