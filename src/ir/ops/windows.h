// The window form's pieces, shared by the decompositions of conv (conv.cpp)
// and max_pool (pool.cpp): an input [N, C, d..] padded on its spatial dims,
// and one strided slice of it per kernel offset.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ir/decomposer.h"

namespace tj::windows {

// The kernel offsets along one dim through which some output position of
// [o0, o1) reads inside an input of n positions (position o reads o*stride
// - pad + t*dilation through offset t): an interval [t0, t1) of the k
// offsets, as a larger offset reads further along; empty where every
// window lies in the padding. The trim of conv's taps (passes) and of its
// channels-last tiles (codegen) read it.
struct TapSpan {
  int64_t t0, t1;
  bool empty() const { return t1 <= t0; }
  int64_t size() const { return empty() ? 0 : t1 - t0; }
};
inline TapSpan live_taps(int64_t o0, int64_t o1, int64_t stride, int64_t pad, int64_t dilation, int64_t k, int64_t n) {
  TapSpan s{k, 0};
  for (int64_t t = 0; t < k; ++t)
    for (int64_t o = o0; o < o1; ++o)
      if (const int64_t i = o * stride - pad + t * dilation; i >= 0 && i < n) {
        s.t0 = std::min(s.t0, t), s.t1 = std::max(s.t1, t + 1);
        break;
      }
  return s;
}

// `s` with its dims in the order `perm` lists them.
Shape permuted(const Shape& s, const std::vector<int64_t>& perm);
// x [N, C, d..] with `fill` (a scalar) concatenated before and after its spatial dims.
ValueId pad_spatial(Decomposer& d, ValueId x, const std::vector<int64_t>& pad_begin, const std::vector<int64_t>& pad_end, ValueId fill);
// Per kernel offset, row-major over the kernel, the padded input's strided
// slice [N, C, o..] under it at every output position (`out` is [N, *,
// o..]). At most 4096 offsets (`op` names the op in the error: a slice each).
std::vector<ValueId> slices(Decomposer& d, ValueId padded, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                            const std::vector<int64_t>& dilation, const Shape& out, const char* op);

}  // namespace tj::windows
