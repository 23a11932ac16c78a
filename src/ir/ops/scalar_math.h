// Scalar arithmetic with the IR's semantics (docs/ir.md), shared by the op
// rows' scalar functions and the interpreter's kernels: integers wrap (two's
// complement, through unsigned arithmetic: no overflow), division by zero is
// an error; float max/min propagate NaN and order -0 below +0.
#pragma once

#include <cmath>
#include <cstdint>

#include "tensorjit/error.h"

namespace tj::scalar {

inline int64_t wrap_add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
inline int64_t wrap_sub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
inline int64_t wrap_mul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }
inline int64_t wrap_neg(int64_t a) { return static_cast<int64_t>(0 - static_cast<uint64_t>(a)); }

// Truncating; INT_MIN / -1 wraps to INT_MIN.
inline int64_t int_div(int64_t a, int64_t b) {
  if (b == 0) throw Error("integer division by zero");
  return b == -1 ? wrap_neg(a) : a / b;
}

// The remainder: with `fmod`, of truncating division (the sign of a, as C's
// %); without, of floor division (the sign of b, as Python's and numpy's).
inline int64_t int_mod(int64_t a, int64_t b, bool fmod) {
  if (b == 0) throw Error("integer division by zero");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
template <class T>
T float_mod(T a, T b, bool fmod) {
  T r = std::fmod(a, b);
  if (fmod) return r;
  if (r != 0) {
    if ((b < 0) != (r < 0)) r += b;
  } else {
    r = std::copysign(T(0), b);
  }
  return r;
}

// IEEE 754-2019 maximum: NaN-propagating, +0 above -0 (numpy's maximum).
template <class T>
T ieee_max(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  if (a != b) return a > b ? a : b;
  return std::signbit(a) ? b : a;
}
template <class T>
T ieee_min(T a, T b) {
  return -ieee_max(-a, -b);
}

}  // namespace tj::scalar
