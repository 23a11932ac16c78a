// The small float formats of ONNX and OCP: float8 e4m3fn, e4m3fnuz, e5m2,
// e5m2fnuz and e8m0, and float4 e2m1. Values are computed in float; these
// functions round a float to a format, and convert between a format's
// values and its bits.
//
// This file is compiled twice: into the runtime (the interpreter, NDArray)
// and, as text, into the preamble of every generated program
// (CMakeLists.txt embeds it), so both round the same way. It must stay
// plain C++ with no includes of its own beyond the standard library's.
#pragma once

#include <cmath>
#include <cstdint>

// Format F: 0 e4m3fn, 1 e4m3fnuz, 2 e5m2, 3 e5m2fnuz, 4 float4 e2m1,
// 5 e8m0 (exponent only: 2^(bits - 127), 0xff NaN).
//   M: mantissa bits; EMIN: exponent of the smallest normal (1 - bias);
//   MAX: largest finite value; INF: has infinities (e5m2); UZ: "unsigned
//   zero" formats (no -0; their NaN is the bits of -0, 0x80); NAN_BITS: the
//   NaN this code writes; SIGN: the sign bit.
template <int F> struct tj_minifmt;
template <> struct tj_minifmt<0> { static constexpr int M = 3, EMIN = -6; static constexpr float MAX = 448.0f; static constexpr bool INF = false, UZ = false; static constexpr unsigned NAN_BITS = 0x7f, SIGN = 0x80; };
template <> struct tj_minifmt<1> { static constexpr int M = 3, EMIN = -7; static constexpr float MAX = 240.0f; static constexpr bool INF = false, UZ = true; static constexpr unsigned NAN_BITS = 0x80, SIGN = 0x80; };
template <> struct tj_minifmt<2> { static constexpr int M = 2, EMIN = -14; static constexpr float MAX = 57344.0f; static constexpr bool INF = true, UZ = false; static constexpr unsigned NAN_BITS = 0x7e, SIGN = 0x80; };
template <> struct tj_minifmt<3> { static constexpr int M = 2, EMIN = -15; static constexpr float MAX = 57344.0f; static constexpr bool INF = false, UZ = true; static constexpr unsigned NAN_BITS = 0x80, SIGN = 0x80; };
template <> struct tj_minifmt<4> { static constexpr int M = 1, EMIN = 0; static constexpr float MAX = 6.0f; static constexpr bool INF = false, UZ = false; static constexpr unsigned NAN_BITS = 0x7, SIGN = 0x8; };

// x rounded to format F, to nearest even. Out of range (a rounded value
// beyond MAX, or an infinity): +-MAX when saturating, else infinity where
// the format has one and NaN where it does not (ONNX Cast's two tables).
// float4 has no NaN: NaN becomes 6 and the format always saturates (ONNX's
// float4 table). e8m0 rounds up to a power of two and saturates to
// [2^-127, 2^127] (ONNX Cast's default round_mode "up"); not saturating,
// what it cannot hold is NaN.
template <int F>
static inline float tj_mini_round(float x, bool saturate) {
  if constexpr (F == 5) {
    if (x != x) return x;
    float a = std::fabs(x);  // negative values are unspecified: their magnitude
    if (a == INFINITY) return saturate ? std::ldexp(1.0f, 127) : NAN;
    if (a == 0) return saturate ? std::ldexp(1.0f, -127) : NAN;
    int e = 0;
    float f = std::frexp(a, &e);  // a = f 2^e, f in [0.5, 1)
    int k = f == 0.5f ? e - 1 : e;  // the smallest power of two at least a
    if (k > 127) return saturate ? std::ldexp(1.0f, 127) : NAN;
    if (k < -127) return saturate ? std::ldexp(1.0f, -127) : NAN;
    return std::ldexp(1.0f, k);
  } else {
    using P = tj_minifmt<F>;
    if (x != x) return F == 4 ? P::MAX : x;
    float a = std::fabs(x), r;
    if (a == INFINITY) {
      r = a;
    } else {
      int e = 0;
      (void)std::frexp(a, &e);
      int ex = e - 1 < P::EMIN ? P::EMIN : e - 1;  // the exponent of a's leading bit, or of the subnormals
      float q = std::ldexp(1.0f, ex - P::M);       // the spacing of the format's values at a
      r = std::nearbyint(a / q) * q;               // exact scalings: one rounding, to nearest even
    }
    if (r > P::MAX) r = saturate || F == 4 ? P::MAX : P::INF ? INFINITY : NAN;
    if (r != r) return r;
    if (P::UZ && r == 0) return 0.0f;
    return std::copysign(r, x);
  }
}

// The bits of v, a value of format F (as tj_mini_round returns), NaN or an
// infinity the format holds.
template <int F>
static inline unsigned tj_mini_bits(float v) {
  if constexpr (F == 5) {
    if (v != v || v <= 0) return 0xff;
    int e = 0;
    (void)std::frexp(v, &e);
    return (unsigned)(e - 1 + 127) & 0xff;
  } else {
    using P = tj_minifmt<F>;
    if (v != v) return P::NAN_BITS;
    unsigned s = std::signbit(v) && !(P::UZ && v == 0) ? P::SIGN : 0u;
    float a = std::fabs(v);
    if (a == INFINITY) return s | (P::INF ? 0x7cu : P::NAN_BITS);
    if (a < std::ldexp(1.0f, P::EMIN))  // zero or subnormal: exponent field 0
      return s | (unsigned)(a / std::ldexp(1.0f, P::EMIN - P::M));
    int e = 0;
    (void)std::frexp(a, &e);
    unsigned man = (unsigned)(a / std::ldexp(1.0f, e - 1 - P::M)) - (1u << P::M);
    return s | (unsigned)(e - 1 - P::EMIN + 1) << P::M | man;
  }
}

// The value of bits b of format F.
template <int F>
static inline float tj_mini_value(unsigned b) {
  if constexpr (F == 5) {
    b &= 0xff;
    return b == 0xff ? NAN : std::ldexp(1.0f, (int)b - 127);
  } else {
    using P = tj_minifmt<F>;
    b &= P::SIGN | (P::SIGN - 1);
    if (P::UZ && b == 0x80) return NAN;
    if (F == 0 && (b & 0x7f) == 0x7f) return NAN;
    const unsigned mag = b & (P::SIGN - 1), ef = mag >> P::M, man = mag & ((1u << P::M) - 1);
    if (F == 2 && ef == 0x1f) return man ? NAN : (b & P::SIGN ? -INFINITY : INFINITY);
    float a = ef == 0 ? std::ldexp((float)man, P::EMIN - P::M) : std::ldexp((float)((1u << P::M) | man), (int)ef - 1 + P::EMIN - P::M);
    return b & P::SIGN ? -a : a;
  }
}
