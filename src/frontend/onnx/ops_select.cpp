// ONNX converters whose output's size is decided by data: Compress (its
// condition) and Unique (its input). That data must be known at import: a
// constant, or a graph input the caller specializes on (tj::OnnxFunction).
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "frontend/onnx/context.h"

namespace tj::onnx_import {

namespace {

// The slices along the axis (or of the flattened input) whose condition is
// true: the condition must be known (its count decides the shape).
R compress(Ctx& c) {
  Tensor x = c.in(0);
  const NDArray& cond = c.known(1, "the condition");
  const auto* a = c.attr("axis");
  if (!a) x = reshape(x, {Dim(-1)});
  int64_t axis = a ? axis_of(c, a->i(), x.rank()) : 0;
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond.numel(); ++i)
    if (cond.get(i) != 0) keep.push_back(i);
  int64_t n = static_dim(c, x, axis, "Compress over a symbolic dim");
  for (int64_t i : keep)
    if (i >= n) c.fail("the condition selects index " + std::to_string(i) + " of a dim of " + std::to_string(n));
  return {v(take(c, x, axis, keep))};
}

// The distinct elements (or slices along `axis`), sorted or in order of
// first appearance, with the first index, the inverse map and the counts.
// How many there are decides the shape, so the input must be known (a
// constant, or a graph input the caller specializes on: tj::OnnxFunction).
R unique(Ctx& c) {
  const NDArray& a = c.known(0, "the input of Unique (its output's shape depends on its values)");
  Tensor x = c.in(0);
  const auto* ax = c.attr("axis");
  if (!ax) x = reshape(x, {Dim(a.numel())});
  int64_t axis = ax ? axis_of(c, ax->i(), x.rank()) : 0;
  const std::vector<int64_t> dims = ax ? a.shape() : std::vector<int64_t>{a.numel()};
  int64_t n = dims[static_cast<size_t>(axis)], inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < dims.size(); ++d) inner *= dims[d];
  int64_t outer = n == 0 || inner == 0 ? 0 : a.numel() / n / inner;
  // Slice i as a key, its elements in row-major order: (is NaN, value), so
  // that NaNs are one value that sorts last, as numpy's; long double holds
  // every 64-bit integer exactly.
  using Elem = std::pair<bool, long double>;
  auto elem = [&](int64_t k) -> Elem {
    if (a.dtype() == DType::i64) return {false, static_cast<long double>(a.data<int64_t>()[k])};
    if (a.dtype() == DType::u64) return {false, static_cast<long double>(a.data<uint64_t>()[k])};
    double d = a.get(k);
    return std::isnan(d) ? Elem{true, 0.0L} : Elem{false, d};
  };
  auto key = [&](int64_t i) {
    std::vector<Elem> k;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) k.push_back(elem((o * n + i) * inner + j));
    return k;
  };
  std::map<std::vector<Elem>, int64_t> first;  // key -> its first index
  std::vector<int64_t> order;                    // first indices in order of appearance
  std::vector<int64_t> which(static_cast<size_t>(n));
  std::vector<std::vector<Elem>> keys;
  for (int64_t i = 0; i < n; ++i) {
    auto [it, fresh] = first.emplace(key(i), i);
    if (fresh) order.push_back(i);
    keys.push_back(it->first);
  }
  if (c.attr_int("sorted", 1) != 0) {
    order.clear();
    for (const auto& [k, i] : first) order.push_back(i);  // std::map: lexicographic
  }
  std::map<int64_t, int64_t> slot;  // first index -> position in Y
  for (size_t p = 0; p < order.size(); ++p) slot[order[p]] = static_cast<int64_t>(p);
  std::vector<int64_t> inverse, counts(order.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t p = slot[first.at(keys[static_cast<size_t>(i)])];
    inverse.push_back(p);
    ++counts[static_cast<size_t>(p)];
  }
  auto ints = [&](const std::vector<int64_t>& xs) {
    return known_value(c, NDArray::of<int64_t>({static_cast<int64_t>(xs.size())}, xs));
  };
  return {v(take(c, x, axis, order)), ints(order), ints(inverse), ints(counts)};
}

}  // namespace

void add_select_ops(ConverterTable& t) { t.insert({{"Compress", compress}, {"Unique", unique}}); }

}  // namespace tj::onnx_import
