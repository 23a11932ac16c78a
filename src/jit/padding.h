// Padding for bucketed dims: an array into the leading corner of a larger
// one (the rest zeroed), and a leading block cut back out.
#pragma once

#include <vector>

#include "tensorjit/ndarray.h"

namespace tj {

// Copies the leading block `shape` of src into the leading corner of dst
// (both at least that big on every axis), a row of the last axis at a time.
void copy_block(const NDArray& src, NDArray& dst, const std::vector<int64_t>& shape);
// src into the leading corner of dst, zeros everywhere else: one pass over dst.
void pad_into(const NDArray& src, NDArray& dst);
// The leading block of `src` of shape `shape` (a copy).
NDArray corner(const NDArray& src, const std::vector<int64_t>& shape);

}  // namespace tj
