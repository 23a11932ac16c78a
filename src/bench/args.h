// Values from text, checked, for the benchmarks and demos and the command
// lines that drive them: every malformed value is a tj::Error that names
// what it was for ("--sym T: 'x' is not ..."), never an exception of the
// standard library or a silently wrong number.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "tensorjit/ndarray.h"

namespace tj::bench {

std::string read_source(const std::string& path);  // "-" is stdin
Graph load_graph(const std::string& path);         // IR text (errors carry FILE:LINE:COL) or an .onnx model
DType dtype_arg(const std::string& s);
Dim dim_arg(const std::string& text, const char* option);
std::pair<std::string, std::string> split_eq(const std::string& s, const char* what);
// s cut at each `sep`, empty parts kept ("a,,b" is a, "", b; "" is one empty part).
std::vector<std::string> split_on(const std::string& s, char sep);
double parse_number(const std::string& s, const std::string& what);

// An integer in [lo, hi] (decimal, exact, no fraction or exponent), or
// "WHAT: 'S' is not ...".
int64_t int_arg(const std::string& s, const std::string& what, int64_t lo, int64_t hi);
constexpr int64_t kMaxSize = int64_t{1} << 40;  // --sym, and sizes bound from given inputs
int64_t size_arg(const std::string& s, const std::string& what);  // 0 .. kMaxSize
// Element k of `a` from text, as suits a's dtype: integers exact and in range
// (i32, i64), bool 0/1/true/false, floats any number or nan/inf/-inf (finite
// values must be finite in the dtype).
void set_element(NDArray& a, int64_t k, const std::string& text, const std::string& what);
// Creates `dir` (and parents) or throws "cannot create folder 'DIR': why".
void make_folder(const std::string& dir);

}  // namespace tj::bench
