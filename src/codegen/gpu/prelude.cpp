// The helpers of every GPU program, the same text for OpenCL C and CUDA C
// (their differences are the renderer's: TJ_FN, TJ_GLOBAL, tj_as_float,
// tj_as_uint). Generic helpers are one function per type, named after it
// (tj_iadd_int32_t), since OpenCL C has no templates: the ops' GPU
// expressions name them with $T (ir/op.h, OpDef::gpu_expr). Each keeps the
// semantics of the C++ backend's helper of the same name (codegen/cpp,
// emit.cpp's prelude), which are the interpreter's.
#include <cstdint>
#include <string>
#include <utility>

#include "codegen/abi.h"
#include "codegen/c_text.h"
#include "codegen/gpu/renderer.h"

namespace tj::gpu {

using codegen::replace_all;

namespace {

struct IntType {
  const char* name;
  int bits;
  bool is_signed;
};
// uint8_t is bool (and u8 is char8_t), as in the C++ backend.
constexpr IntType kInts[] = {{"int64_t", 64, true},   {"int32_t", 32, true},   {"int16_t", 16, true},   {"int8_t", 8, true},
                             {"uint64_t", 64, false}, {"uint32_t", 32, false}, {"uint16_t", 16, false}, {"char8_t", 8, false},
                             {"uint8_t", 8, false}};

// Wrapping arithmetic through unsigned (at least 32 bits wide, so that
// narrow products do not overflow int), division by zero an error
// (tj_status_division_by_zero), INT_MIN / -1 wrapping to INT_MIN, mod with the divisor's
// sign unless fmod.
std::string int_helpers(const IntType& t) {
  std::string s =
      "TJ_FN T tj_iadd_T(T a, T b) { return (T)((U)a + (U)b); }\n"
      "TJ_FN T tj_isub_T(T a, T b) { return (T)((U)a - (U)b); }\n"
      "TJ_FN T tj_imul_T(T a, T b) { return (T)((U)a * (U)b); }\n"
      "TJ_FN T tj_ineg_T(T a) { return (T)((U)0 - (U)a); }\n"
      "TJ_FN T tj_iabs_T(T a) { return NEGATIVE(a) ? tj_ineg_T(a) : a; }\n"
      "TJ_FN T tj_smax_T(T a, T b) { return a < b ? b : a; }\n"
      "TJ_FN T tj_smin_T(T a, T b) { return b < a ? b : a; }\n"
      "TJ_FN T tj_idiv_T(T a, T b, TJ_GLOBAL int* st) {\n"
      "  if (b == 0) { tj_fail(st, tj_status_division_by_zero); return 0; }\n  MINUS_ONE(tj_ineg_T(a))\n  return (T)(a / b);\n}\n"
      "TJ_FN T tj_imod_T(T a, T b, int fmod, TJ_GLOBAL int* st) {\n"
      "  if (b == 0) { tj_fail(st, tj_status_division_by_zero); return 0; }\n  MINUS_ONE(0)\n  const T r = (T)(a % b);\n"
      "  return MOD_SIGN;\n}\n";
  s = replace_all(s, "NEGATIVE(a) ? tj_ineg_T(a) : a", t.is_signed ? "a < 0 ? tj_ineg_T(a) : a" : "a");
  s = replace_all(s, "MOD_SIGN", t.is_signed ? "!fmod && r != 0 && ((r < 0) != (b < 0)) ? (T)(r + b) : r" : "(void)fmod, r");
  s = replace_all(s, "MINUS_ONE(tj_ineg_T(a))", t.is_signed ? "if (b == (T)-1) return tj_ineg_T(a);" : "");
  s = replace_all(s, "MINUS_ONE(0)", t.is_signed ? "if (b == (T)-1) return 0;" : "");
  s = replace_all(s, "tj_ineg_T", std::string("tj_ineg_") + t.name);
  s = replace_all(s, "_T(", std::string("_") + t.name + "(");
  s = replace_all(s, "(U)", t.bits == 64 ? "(ulong)" : "(uint)");
  s = replace_all(s, "(T)", std::string("(") + t.name + ")");
  return replace_all(s, "T ", std::string(t.name) + " ") + "\n";
}

// Float to integer: saturating to the target's range, NaN to 0.
std::string f2i(const IntType& t, const char* f) {
  const int digits = t.bits - (t.is_signed ? 1 : 0);
  std::string max, min;
  if (t.bits == 64) {
    max = t.is_signed ? "9223372036854775807L" : "18446744073709551615UL";
    min = t.is_signed ? "(-9223372036854775807L-1)" : "0";
  } else {
    max = std::to_string(t.is_signed ? (int64_t{1} << (t.bits - 1)) - 1 : (int64_t{1} << t.bits) - 1);
    min = t.is_signed ? std::to_string(-(int64_t{1} << (t.bits - 1))) : "0";
  }
  const std::string T = t.name, F = f;
  return "TJ_FN " + T + " tj_f2i_" + T + "_" + F + "(" + F + " x) {\n  const " + F + " lim = (" + F + ")ldexp(1.0, " +  // 2^digits, exactly
         std::to_string(digits) + ");\n  const " + F + " lo = " + (t.is_signed ? "-lim" : "(" + F + ")0") +
         ";\n  if (x != x) return 0;\n  if (x >= lim) return (" + T + ")" + max + ";\n  if (x < lo) return (" + T + ")" + min +
         ";\n  return (" + T + ")x;\n}\n";
}

std::string float_helpers(const char* f) {
  std::string s =
      "TJ_FN F tj_max_F(F a, F b) {\n  if (a != a || b != b) return a != a ? a : b;\n  if (a != b) return a > b ? a : b;\n"
      "  return signbit(a) ? b : a;\n}\n"
      "TJ_FN F tj_min_F(F a, F b) { return -tj_max_F(-a, -b); }\n"
      "TJ_FN F tj_smax_F(F a, F b) { return a < b ? b : a; }\n"
      "TJ_FN F tj_smin_F(F a, F b) { return b < a ? b : a; }\n"
      "TJ_FN F tj_fmod_F(F a, F b, int fm) {\n  const F r = fmod(a, b);\n  if (fm) return r;\n"
      "  if (r != 0) return (b < 0) != (r < 0) ? r + b : r;\n  return copysign((F)0, b);\n}\n";
  s = replace_all(s, "_F(", std::string("_") + f + "(");
  s = replace_all(s, "(F)", std::string("(") + f + ")");
  s = replace_all(s, "F ", std::string(f) + " ");
  for (const IntType& t : kInts)
    if (std::string(t.name) != "uint8_t") s += f2i(t, f);
  return s + "\n";
}

// The status codes of codegen/abi.h, by name (OpenCL C has no enum with
// a base type to share the header's text with).
std::string status_codes() {
  std::string s;
  for (auto [name, code] : {std::pair{"tj_status_index_out_of_range", tj_status_index_out_of_range},
                            std::pair{"tj_status_division_by_zero", tj_status_division_by_zero},
                            std::pair{"tj_status_kv_write_outside", tj_status_kv_write_outside}})
    s += std::string("#define ") + name + " " + std::to_string(code) + "\n";
  return s;
}

}  // namespace

std::string shared_prelude() {
  std::string s = status_codes() + "#ifndef INT64_MIN\n#define INT64_MIN (-9223372036854775807L-1)\n#endif\n"
                  "// Integers wrap; floats' max and min order -0 below +0 and keep NaN (the interpreter's).\n";
  for (const IntType& t : kInts) s += int_helpers(t);
  s += float_helpers("float");
  s += float_helpers("double");
  s +=
      "// bf16 and f16 in memory: their 16 bits, converted to and from float (rounding to nearest\n"
      "// even); values are computed in float and each op's result rounded (tj_rbf16, tj_rf16).\n"
      "typedef uint16_t tj_bf16;\ntypedef uint16_t tj_f16;\n"
      "TJ_FN uint16_t tj_bf16_bits(float f) {\n  uint u = tj_as_uint(f);\n  if (f != f) return (uint16_t)((u >> 16) | 0x40);\n"
      "  u += 0x7fff + ((u >> 16) & 1);\n  return (uint16_t)(u >> 16);\n}\n"
      "TJ_FN float tj_bf16_value(uint16_t b) { return tj_as_float((uint)b << 16); }\n"
      "TJ_FN float tj_rbf16(float x) { return tj_bf16_value(tj_bf16_bits(x)); }\n"
      "TJ_FN uint16_t tj_f16_bits(float f) {\n  const uint x = tj_as_uint(f), sign = (x >> 16) & 0x8000, ax = x & 0x7fffffff;\n"
      "  if (ax >= 0x7f800000) return (uint16_t)(sign | (ax > 0x7f800000 ? 0x7e00 : 0x7c00));\n"
      "  if (ax >= 0x477ff000) return (uint16_t)(sign | 0x7c00);  // 65520 and up round to infinity\n"
      "  if (ax < 0x38800000) return (uint16_t)(sign | (uint)rint(tj_as_float(ax) * 16777216.0f));  // subnormal: units of 2^-24\n"
      "  uint r = ax - 0x38000000;\n  r += 0xfff + ((r >> 13) & 1);\n  return (uint16_t)(sign | (r >> 13));\n}\n"
      "TJ_FN float tj_f16_value(uint16_t h) {\n  const uint sign = ((uint)h & 0x8000) << 16, e = ((uint)h >> 10) & 0x1f, m = (uint)h & 0x3ff;\n"
      "  if (e == 0) { const float v = (float)m * 5.9604644775390625e-8f; return sign ? -v : v; }\n"
      "  if (e == 31) return tj_as_float(sign | 0x7f800000 | (m << 13));\n"
      "  return tj_as_float(sign | ((e + 112) << 23) | (m << 13));\n}\n"
      "TJ_FN float tj_rf16(float x) { return tj_f16_value(tj_f16_bits(x)); }\n"
      "// double to float rounded to odd: a narrow float from double rounds once.\n"
      "TJ_FN float tj_odd(double v) {\n  float f = (float)v;\n  if (v != v || (double)f == v) return f;\n"
      "  if (fabs((double)f) > fabs(v)) f = tj_as_float(tj_as_uint(f) - 1);  // toward zero\n"
      "  return tj_as_float(tj_as_uint(f) | 1);\n}\n\n"
      "// An index into a dim of n: negative from the end; out of range is tj_status_index_out_of_range.\n"
      "TJ_FN int64_t tj_index_(int64_t i, int64_t n, TJ_GLOBAL int* st) {\n"
      "  if (i < -n || i >= n) { tj_fail(st, tj_status_index_out_of_range); return 0; }\n  return i < 0 ? i + n : i;\n}\n"
      "#define tj_index(i, n) tj_index_((i), (n), tj_status)\n\n"
      "TJ_FN double tj_gelu_tanh(double x, double c) { return 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x))); }\n"
      "TJ_FN double tj_gelu_erf(double x, double c) { return 0.5 * x * (1.0 + erf(x * c)); }\n\n";
  return s;
}

}  // namespace tj::gpu
