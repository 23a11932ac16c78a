#include "jit/padding.h"

#include <cstring>

namespace tj {

// Copies the leading block `shape` of src into the leading corner of dst
// (both at least that big on every axis), a row of the last axis at a time.
void copy_block(const NDArray& src, NDArray& dst, const std::vector<int64_t>& shape) {
  size_t es = dtype_size(src.dtype());
  if (shape.empty()) {
    std::memcpy(dst.raw(), src.raw(), es);
    return;
  }
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  if (total == 0) return;
  const auto &ss = src.shape(), &ds = dst.shape();
  size_t r = shape.size();
  std::vector<int64_t> idx(r - 1, 0);
  const char* s = static_cast<const char*>(src.raw());
  char* d = static_cast<char*>(dst.raw());
  for (int64_t row = 0; row < total / shape.back(); ++row) {
    int64_t so = 0, dof = 0;
    for (size_t a = 0; a + 1 < r; ++a) so = so * ss[a] + idx[a], dof = dof * ds[a] + idx[a];
    std::memcpy(d + static_cast<size_t>(dof * ds.back()) * es, s + static_cast<size_t>(so * ss.back()) * es,
                static_cast<size_t>(shape.back()) * es);
    for (size_t a = r - 1; a-- > 0;) {
      if (++idx[a] < shape[a]) break;
      idx[a] = 0;
    }
  }
}

// src into the leading corner of dst, and zeros everywhere else in dst: one
// pass over dst.
void pad_into(const NDArray& src, NDArray& dst) {
  size_t es = dtype_size(src.dtype());
  const auto &ss = src.shape(), &ds = dst.shape();
  if (ds.empty() || dst.numel() == 0 || src.numel() == 0) {
    std::memset(dst.raw(), 0, dst.nbytes());
    if (ds.empty()) std::memcpy(dst.raw(), src.raw(), es);
    else if (src.numel() > 0) copy_block(src, dst, ss);
    return;
  }
  size_t r = ds.size();
  std::vector<int64_t> idx(r - 1, 0);
  const char* s = static_cast<const char*>(src.raw());
  char* d = static_cast<char*>(dst.raw());
  size_t row_bytes = static_cast<size_t>(ds.back()) * es, real_bytes = static_cast<size_t>(ss.back()) * es;
  for (int64_t row = 0; row < dst.numel() / ds.back(); ++row) {
    bool inside = true;
    int64_t so = 0;
    for (size_t a = 0; a + 1 < r; ++a) inside &= idx[a] < ss[a], so = so * ss[a] + idx[a];
    char* out = d + static_cast<size_t>(row) * row_bytes;
    if (inside) {
      std::memcpy(out, s + static_cast<size_t>(so) * real_bytes, real_bytes);
      std::memset(out + real_bytes, 0, row_bytes - real_bytes);
    } else {
      std::memset(out, 0, row_bytes);
    }
    for (size_t a = r - 1; a-- > 0;) {
      if (++idx[a] < ds[a]) break;
      idx[a] = 0;
    }
  }
}

// The leading block of `src` of shape `shape`.
NDArray corner(const NDArray& src, const std::vector<int64_t>& shape) {
  if (shape == src.shape()) return src;
  NDArray out(src.dtype(), shape);
  copy_block(src, out, shape);
  return out;
}

}  // namespace tj
