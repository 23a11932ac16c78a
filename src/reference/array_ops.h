// Dense row-major arrays for the interpreter's kernels (internal to
// src/runtime): shapes and strides, numpy broadcasting, a map of a scalar
// function over broadcast operands, strided copies.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "reference/kernels.h"
#include "tensorjit/error.h"

namespace tj::array_ops {

using Idx = std::vector<int64_t>;
using I = int64_t;  // the element type of integer and bool values

inline int64_t count(const Idx& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

inline Idx row_major_strides(const Idx& s) {
  Idx st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

// The windows of a convolution or pool over spatial dims `in` (row-major,
// flattened): for kernel offset `tap` and output position `pos` (each
// row-major over `kernel` and `out`), the flat input position it reads, or
// -1 in the padding.
struct Windows {
  Idx in, kernel, out, stride, pad_begin, dilation;
  int64_t source(int64_t tap, int64_t pos) const {
    const size_t k = kernel.size();
    int64_t at = 0, t = tap, p = pos, tw = 1, pw = 1;
    for (size_t i = 0; i < k; ++i) tw *= kernel[i], pw *= out[i];
    for (size_t i = 0; i < k && at >= 0; ++i) {
      tw /= kernel[i], pw /= out[i];
      const int64_t q = p / pw * stride[i] - pad_begin[i] + t / tw * dilation[i];
      t %= tw, p %= pw;
      at = q < 0 || q >= in[i] ? -1 : at * in[i] + q;
    }
    return at;
  }
};

// Strides that read `in` broadcast to `out` (numpy rules, aligned right).
inline Idx broadcast_strides(const Idx& in, const Idx& out) {
  Idx st(out.size(), 0);
  Idx ist = row_major_strides(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[off + i] = in[i] == 1 ? 0 : ist[i];
  return st;
}

template <class E>
Array<E> make(Idx shape, std::vector<E> data) {
  return Array<E>{std::move(shape), std::make_shared<const std::vector<E>>(std::move(data))};
}

// An integer scalar operand's value (a position, an offset).
template <class T>
int64_t scalar_int(const Value<T>& v) {
  const auto& a = v.template as<I>();
  if (a.numel() < 1) throw Error("an integer scalar operand has no element");
  return a.ptr()[0];
}

// Calls f(out_index, offsets) for each output row: `offsets[k]` is where input
// k's row starts; the row itself runs along the last dim with strides st[k].
template <size_t N, class F>
void for_each_row(const Idx& out, const std::array<Idx, N>& st, F f) {
  size_t r = out.size();
  if (r == 0) {
    std::array<int64_t, N> off{};
    f(int64_t{0}, off, int64_t{1});
    return;
  }
  int64_t inner = out[r - 1];
  if (inner == 0) return;
  int64_t rows = count(out) / inner;
  Idx idx(r - 1, 0);
  for (int64_t row = 0; row < rows; ++row) {
    std::array<int64_t, N> off{};
    for (size_t k = 0; k < N; ++k)
      for (size_t d = 0; d + 1 < r; ++d) off[k] += idx[d] * st[k][d];
    f(row * inner, off, inner);
    for (size_t d = r - 1; d-- > 0;) {
      if (++idx[d] < out[d]) break;
      idx[d] = 0;
    }
  }
}

// out[i] = f(in0[i], in1[i], ...) over the broadcast shape `out`; the inputs
// may have different element types, the result has R.
template <class R, class F, class... E>
Array<R> map(const Idx& out, F f, const Array<E>&... in) {
  constexpr size_t N = sizeof...(E);
  std::vector<R> r(static_cast<size_t>(count(out)));
  auto p = std::make_tuple(in.ptr()...);
  if (((in.shape == out) && ...)) {
    std::apply([&](auto... q) { for (size_t i = 0; i < r.size(); ++i) r[i] = f(q[i]...); }, p);
  } else {
    std::array<Idx, N> st{broadcast_strides(in.shape, out)...};
    size_t last = out.empty() ? 0 : out.size() - 1;
    for_each_row<N>(out, st, [&](int64_t o, const std::array<int64_t, N>& off, int64_t inner) {
      std::array<int64_t, N> s{};
      if (!out.empty())
        for (size_t k = 0; k < N; ++k) s[k] = st[k][last];
      [&]<size_t... K>(std::index_sequence<K...>) {
        for (int64_t j = 0; j < inner; ++j) r[static_cast<size_t>(o + j)] = f(std::get<K>(p)[off[K] + j * s[K]]...);
      }(std::make_index_sequence<N>{});
    });
  }
  return make(out, std::move(r));
}

// Copies `src` read through (offset, strides) into a dense array of `out`.
template <class E>
Array<E> copy_strided(const Array<E>& src, int64_t offset, const Idx& strides, const Idx& out) {
  std::vector<E> r(static_cast<size_t>(count(out)));
  if (r.empty()) return make(out, std::move(r));
  const E* p = src.ptr() + offset;
  size_t last = out.empty() ? 0 : out.size() - 1;
  int64_t s = out.empty() ? 0 : strides[last];
  if (out.size() >= 2 && s != 1 && s != 0 && strides[last - 1] == 1 && out[last - 1] > 1) {
    // A transpose of the last two dims (a weight folded into its GEMV's
    // layout: 4096x4096 in vgg11): in tiles of kTile x kTile, read down the
    // source's contiguous rows, written across the result's, each line
    // used whole while it is in the cache (row by row, every read of a
    // 16 KB stride missed).
    constexpr int64_t kTile = 32;
    const int64_t R = out[last - 1], Cn = out[last];
    // Each batch (the dims before the last two; one where there are none)
    // as a row of one element at offset off[0].
    Idx batch(out.begin(), out.end() - 2), bst(strides.begin(), strides.end() - 2);
    batch.push_back(1), bst.push_back(0);
    for_each_row<1>(batch, {bst}, [&](int64_t b, const std::array<int64_t, 1>& off, int64_t) {
      const E* from = p + off[0];
      E* to = r.data() + b * R * Cn;
      for (int64_t i0 = 0; i0 < R; i0 += kTile)
        for (int64_t j0 = 0; j0 < Cn; j0 += kTile)
          for (int64_t j = j0; j < std::min(j0 + kTile, Cn); ++j)
            for (int64_t i = i0; i < std::min(i0 + kTile, R); ++i) to[i * Cn + j] = from[i + j * s];
    });
    return make(out, std::move(r));
  }
  for_each_row<1>(out, {strides}, [&](int64_t o, const std::array<int64_t, 1>& off, int64_t inner) {
    for (int64_t j = 0; j < inner; ++j) r[static_cast<size_t>(o + j)] = p[off[0] + j * s];
  });
  return make(out, std::move(r));
}

// Splits a shape around `axis` into (outer, length, inner).
inline std::array<int64_t, 3> around(const Idx& s, int64_t axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= s[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis) + 1; i < s.size(); ++i) inner *= s[i];
  return {outer, s[static_cast<size_t>(axis)], inner};
}

}  // namespace tj::array_ops
