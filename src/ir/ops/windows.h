// The window form's pieces, shared by the decompositions of conv (conv.cpp)
// and max_pool (pool.cpp): an input [N, C, d..] padded on its spatial dims,
// and one strided slice of it per kernel offset.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/decomposer.h"

namespace tj::windows {

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
