// C-family text that every target's kernels are written in (C++, OpenCL C,
// CUDA C): a dtype's C type and rounding, literals, sizes as expressions
// over the size symbols, and flat and multi-dimensional indices. Shared by
// the sibling emitters, codegen/cpp and codegen/gpu.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "ir/graph.h"

namespace tj::codegen {

using Idx = std::vector<std::string>;
// Sizes are Dims: constants, or polynomials over the graph's size symbols,
// which generated code reads at run time (C() prints them).
using Sizes = std::vector<Dim>;

// A dtype's C type in memory; f16 and bf16 are 16-bit structs (tj_f16,
// tj_bf16) and the float8/float4 formats 8-bit ones (tj_mf<F>) that convert
// to and from float; the 4- and 2-bit integers are int8_t and char8_t.
std::string ctype(DType t);
// The type values of a dtype are computed in: float for the narrow floats.
std::string compute_ctype(DType t);
// Floats narrower than float: stored in structs, computed in float.
inline bool is_narrow_float(DType t) { return t == DType::f16 || t == DType::bf16 || is_minifloat(t); }
// `expr` rounded to `t` as the interpreter rounds each op's result: a float
// to a narrow float (float8 saturating unless `saturate` is false), an
// integer wrapped to 4 or 2 bits; `expr` itself otherwise.
std::string rounded(const std::string& expr, DType t, bool saturate = true);
std::string literal(double v, DType t);
Sizes contiguous_strides(const Sizes& s);
Dim count(const Sizes& s);
// a / b, exact (sizes divide evenly where the emitter divides them).
Dim div(const Dim& a, const Dim& b);
// The C name of size symbol `s`.
std::string sym_name(const std::string& s);
// `s` with every occurrence of `from` replaced by `to` (text templates).
std::string replace_all(std::string s, const std::string& from, const std::string& to);
// A size as a C expression ("128LL", "(2LL*tj_sym_S+1LL)").
std::string C(const Dim& d);
// The index of flat position `f` in an array of `shape`, and back.
Idx unflat(const std::string& f, const Sizes& shape);
std::string flat(const Idx& idx, const Sizes& shape);
Idx loop_vars(size_t rank, const std::string& prefix = "i");
// "a, b, c": strings as they are, numbers in decimal (an initializer list).
template <class T>
std::string comma_list(const std::vector<T>& xs) {
  std::string r;
  for (const T& x : xs) {
    if constexpr (std::is_arithmetic_v<T>) r += (r.empty() ? "" : ", ") + std::to_string(x);
    else r += (r.empty() ? "" : ", ") + std::string(x);
  }
  return r;
}

// A strided view of a base buffer: element (i0..) at offset + sum(i_d * stride_d).
struct Strided {
  ValueId base;
  Dim offset = 0;
  Sizes strides;
};

}  // namespace tj::codegen
