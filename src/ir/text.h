// The IR's text form. One line per node, a header of inputs and params, and a
// return line:
//
//   graph mlp
//   input %x : f32[T,128]
//   param %w1 : f32[128,512]
//   %0 = matmul(%x, %w1) : f32[T,512]
//   %1 = softmax(%0) {axis=1} : f32[T,512]
//   return %1
//
// print(parse(print(g))) == print(g) byte for byte. Malformed text throws
// tj::ParseError with line:column and the offending token.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace tj {

struct PrintOptions {
  // Constants with more elements than this print as a summary (count and
  // content hash: `{value=<4096 values, xxh3 1f0c...>}`), which does not
  // parse back: for logs, where frozen weights would be megabytes of text.
  size_t summarize_constants_over = SIZE_MAX;
};
// What TJ_LOG dumps use: constants over 16 elements summarized.
inline PrintOptions log_print_options() { return PrintOptions{16}; }

std::string print_graph(const Graph& g, const PrintOptions& o = {});
// Each value's name as print_graph writes it: `%name` for inputs and params,
// `%0`, `%1`, ... for the others in order (for reports that name values).
std::vector<std::string> printed_names(const Graph& g);
Graph parse_graph(std::string_view text);

}  // namespace tj
