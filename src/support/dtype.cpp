// The element types (tensorjit/dtype.h): names, integer loads and stores,
// ranges.
#include "tensorjit/dtype.h"

#include <array>
#include <cstdint>
#include <string>

#include "tensorjit/error.h"

namespace tj {

std::string_view dtype_name(DType t) {
  static constexpr std::array<std::string_view, kNumDTypes> names = {
      "f32", "f64", "bf16", "f16", "i32", "i64", "bool", "i8", "u8", "i16", "u16", "u32", "u64",
      "f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz", "f8e8m0", "f4e2m1", "i4", "u4", "i2", "u2"};
  return names[static_cast<size_t>(t)];
}

int64_t load_int(const void* p, int64_t i, DType t) {
  switch (t) {
    case DType::i8: case DType::i4: case DType::i2: return static_cast<const int8_t*>(p)[i];
    case DType::u8: case DType::boolean: case DType::u4: case DType::u2: return static_cast<const uint8_t*>(p)[i];
    case DType::i16: return static_cast<const int16_t*>(p)[i];
    case DType::u16: return static_cast<const uint16_t*>(p)[i];
    case DType::i32: return static_cast<const int32_t*>(p)[i];
    case DType::u32: return static_cast<const uint32_t*>(p)[i];
    case DType::i64: case DType::u64: return static_cast<const int64_t*>(p)[i];
    default: throw Error("load_int: " + std::string(dtype_name(t)) + " is not an integer type");
  }
}

void store_int(void* p, int64_t i, DType t, int64_t v) {
  switch (t) {
    case DType::i8: case DType::u8: case DType::i4: case DType::u4: case DType::i2: case DType::u2:
      static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(wrap_to(v, t));
      break;
    case DType::boolean: static_cast<uint8_t*>(p)[i] = v != 0; break;
    case DType::i16: case DType::u16: static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v); break;
    case DType::i32: case DType::u32: static_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v); break;
    case DType::i64: case DType::u64: static_cast<int64_t*>(p)[i] = v; break;
    default: throw Error("store_int: " + std::string(dtype_name(t)) + " is not an integer type");
  }
}

int64_t wrap_to(int64_t v, DType t) {
  switch (t) {
    case DType::i8: return static_cast<int8_t>(v);  // modular (C++20)
    case DType::u8: return static_cast<uint8_t>(v);
    case DType::i16: return static_cast<int16_t>(v);
    case DType::u16: return static_cast<uint16_t>(v);
    case DType::i32: return static_cast<int32_t>(v);
    case DType::u32: return static_cast<uint32_t>(v);
    case DType::i4: return static_cast<int8_t>(static_cast<uint8_t>(v << 4)) >> 4;  // the low bits, sign-extended
    case DType::u4: return v & 0xf;
    case DType::i2: return static_cast<int8_t>(static_cast<uint8_t>(v << 6)) >> 6;
    case DType::u2: return v & 0x3;
    case DType::boolean: return v != 0;
    default: return v;
  }
}

double int_min(DType t) {
  switch (t) {
    case DType::i8: return -128.0;
    case DType::i4: return -8.0;
    case DType::i2: return -2.0;
    case DType::i16: return -32768.0;
    case DType::i32: return -2147483648.0;
    case DType::i64: return -9223372036854775808.0;
    default: return 0.0;
  }
}

double int_max(DType t) {
  switch (t) {
    case DType::i8: return 127.0;
    case DType::u8: return 255.0;
    case DType::i4: return 7.0;
    case DType::u4: return 15.0;
    case DType::i2: return 1.0;
    case DType::u2: return 3.0;
    case DType::i16: return 32767.0;
    case DType::u16: return 65535.0;
    case DType::i32: return 2147483647.0;
    case DType::u32: return 4294967295.0;
    case DType::i64: return 9223372036854775807.0;
    case DType::u64: return 18446744073709551615.0;
    default: return 1.0;
  }
}

std::optional<DType> parse_dtype(std::string_view s) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (dtype_name(static_cast<DType>(i)) == s) return static_cast<DType>(i);
  return std::nullopt;
}

}  // namespace tj
