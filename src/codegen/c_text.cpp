#include "codegen/c_text.h"

#include <cctype>

#include "ir/op.h"
#include "tensorjit/error.h"

namespace tj::codegen {

std::string ctype(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::i64: return "int64_t";
    case DType::i32: return "int32_t";
    case DType::boolean: return "uint8_t";
    case DType::i8: return "int8_t";
    case DType::u8: return "char8_t";  // unsigned, 8 bits, and a type of its own: uint8_t is bool here
    case DType::i16: return "int16_t";
    case DType::u16: return "uint16_t";
    case DType::u32: return "uint32_t";
    case DType::u64: return "uint64_t";
    case DType::f16: return "tj_f16";
    case DType::bf16: return "tj_bf16";
    case DType::f8e4m3fn: case DType::f8e4m3fnuz: case DType::f8e5m2: case DType::f8e5m2fnuz: case DType::f8e8m0: case DType::f4e2m1:
      return "tj_mf<" + std::to_string(minifloat_format(t)) + ">";
    case DType::i4: case DType::i2: return "int8_t";
    case DType::u4: case DType::u2: return "char8_t";
  }
  throw Error("code generation does not support " + std::string(dtype_name(t)) + " yet");
}

std::string compute_ctype(DType t) { return is_narrow_float(t) ? "float" : ctype(t); }

std::string rounded(const std::string& expr, DType t, bool saturate) {
  switch (t) {
    case DType::bf16: return "tj_rbf16(" + expr + ")";
    case DType::f16: return "tj_rf16(" + expr + ")";
    case DType::i4: case DType::u4: case DType::i2: case DType::u2:
      return "tj_wrapbits<" + ctype(t) + ", " + (t == DType::i4 || t == DType::u4 ? "4" : "2") + ">(" + expr + ")";
    default:
      if (!is_minifloat(t)) return expr;
      return "tj_mini_round<" + std::to_string(minifloat_format(t)) + ">(" + expr + (saturate ? ", true)" : ", false)");
  }
}

std::string literal(double v, DType t) {
  CExpr e;
  e.T = compute_ctype(t);
  e.integer = !is_float(t);
  return e.lit(v);
}

Sizes contiguous_strides(const Sizes& s) {
  Sizes st(s.size());
  Dim acc(1);
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc = acc * s[i];
  }
  return st;
}

Dim count(const Sizes& s) {
  Dim n(1);
  for (const Dim& d : s) n = n * d;
  return n;
}

// a / b, exact (sizes divide evenly where the emitter divides them).
Dim div(const Dim& a, const Dim& b) {
  if (b == Dim(0)) return Dim(0);
  if (auto q = a.div_exact(b)) return *q;
  if (a.is_const() && b.is_const()) return Dim(a.value() / b.value());
  throw Error("code generation: cannot divide " + a.str() + " by " + b.str());
}

// The C name of size symbol `s`.
std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

std::string sym_name(const std::string& s) {
  std::string r = "tj_sym_";
  for (char c : s) r += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return r;
}

// A size as a C expression ("128LL", "(2LL*tj_sym_S+1LL)").
std::string C(const Dim& d) {
  if (d.is_const()) return std::to_string(d.value()) + "LL";
  return "(" + d.c_expr(sym_name) + ")";
}

// The index of flat position `f` in an array of `shape`: the inverse of
// flat(). An array with a zero extent has no element to index (the loop over
// it never runs), so it gets zeros rather than a division by zero that the
// compiler would warn about.
Idx unflat(const std::string& f, const Sizes& shape) {
  Idx r(shape.size(), "0");
  for (const Dim& d : shape)
    if (d == Dim(0)) return r;
  auto cs = contiguous_strides(shape);
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != Dim(1)) r[d] = "((" + f + ")/" + C(cs[d]) + "%" + C(shape[d]) + ")";
  return r;
}

std::string flat(const Idx& idx, const Sizes& shape) {
  auto st = contiguous_strides(shape);
  std::string e;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (shape[d] == Dim(1) || idx[d] == "0") continue;
    std::string term = st[d] == Dim(1) ? "(" + idx[d] + ")" : "(" + idx[d] + ")*" + C(st[d]);
    e += (e.empty() ? "" : " + ") + term;
  }
  return e.empty() ? "0" : e;
}

Idx loop_vars(size_t rank, const std::string& prefix) {
  Idx v;
  for (size_t d = 0; d < rank; ++d) v.push_back(prefix + std::to_string(d));
  return v;
}

}  // namespace tj::codegen
