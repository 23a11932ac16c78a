// Element types. bf16/f16 are sized correctly everywhere; the interpreter
// computes them in f32 (a cast to them rounds to their precision). The
// integers are computed in int64 and wrapped to their width (u64: its bits
// in an int64; the ops whose unsigned meaning differs refuse u64, see
// docs/ir.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tj {

enum class DType : uint8_t {
  f32, f64, bf16, f16, i32, i64, boolean, i8, u8, i16, u16, u32, u64,
  // The small formats of ONNX and OCP (docs/ir.md): float8 (e4m3fn,
  // e4m3fnuz, e5m2, e5m2fnuz, e8m0) and float4 e2m1, computed in float and
  // rounded to the format after each op; 4- and 2-bit integers. One byte
  // each in memory (ONNX files pack the 4- and 2-bit ones; the importer
  // unpacks them).
  f8e4m3fn, f8e4m3fnuz, f8e5m2, f8e5m2fnuz, f8e8m0, f4e2m1, i4, u4, i2, u2
};
constexpr int kNumDTypes = 23;

constexpr int dtype_size(DType t) {
  switch (t) {
    case DType::f64: case DType::i64: case DType::u64: return 8;
    case DType::f32: case DType::i32: case DType::u32: return 4;
    case DType::bf16: case DType::f16: case DType::i16: case DType::u16: return 2;
    case DType::boolean: case DType::i8: case DType::u8: return 1;
    case DType::f8e4m3fn: case DType::f8e4m3fnuz: case DType::f8e5m2: case DType::f8e5m2fnuz: case DType::f8e8m0: case DType::f4e2m1:
    case DType::i4: case DType::u4: case DType::i2: case DType::u2: return 1;
  }
  return 0;
}

// The 4- and 2-bit integers (one byte each in memory).
constexpr bool is_subbyte_int(DType t) { return t == DType::i4 || t == DType::u4 || t == DType::i2 || t == DType::u2; }
// The float8/float4 formats; minifloat_format is their number in
// src/support/minifloat.h (0 e4m3fn ... 5 e8m0).
constexpr bool is_minifloat(DType t) { return t >= DType::f8e4m3fn && t <= DType::f4e2m1; }
constexpr int minifloat_format(DType t) {
  switch (t) {
    case DType::f8e4m3fn: return 0;
    case DType::f8e4m3fnuz: return 1;
    case DType::f8e5m2: return 2;
    case DType::f8e5m2fnuz: return 3;
    case DType::f4e2m1: return 4;
    case DType::f8e8m0: return 5;
    default: return -1;
  }
}

constexpr bool is_float(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::bf16 || t == DType::f16 || is_minifloat(t);
}
constexpr bool is_int(DType t) {
  switch (t) {
    case DType::i8: case DType::u8: case DType::i16: case DType::u16: case DType::i32: case DType::u32: case DType::i64: case DType::u64:
    case DType::i4: case DType::u4: case DType::i2: case DType::u2:
      return true;
    default: return false;
  }
}

std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view s);

// Integer elements in memory as int64 (u64: its bits), and back: `v`
// wrapped to t's width (two's complement).
int64_t load_int(const void* p, int64_t i, DType t);
void store_int(void* p, int64_t i, DType t, int64_t v);
int64_t wrap_to(int64_t v, DType t);
// The smallest and largest values of integer type t, as doubles (u64's
// largest is 2^64 - 1 rounded: 2^64); a float converted to t saturates to
// them (NaN: 0).
double int_min(DType t);
double int_max(DType t);

}  // namespace tj
