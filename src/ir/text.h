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

#include <string>
#include <string_view>

#include "ir/graph.h"

namespace tj {

std::string print_graph(const Graph& g);
Graph parse_graph(std::string_view text);

}  // namespace tj
