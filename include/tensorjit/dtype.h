// Element types. bf16/f16 are sized correctly everywhere; the interpreter
// computes them in f32 (a cast to them rounds to their precision).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tj {

enum class DType : uint8_t { f32, f64, bf16, f16, i32, i64, boolean };

constexpr int dtype_size(DType t) {
  switch (t) {
    case DType::f64: case DType::i64: return 8;
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: case DType::f16: return 2;
    case DType::boolean: return 1;
  }
  return 0;
}

constexpr bool is_float(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::bf16 || t == DType::f16;
}
constexpr bool is_int(DType t) { return t == DType::i32 || t == DType::i64; }

std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view s);

}  // namespace tj
