// Binding a graph's size symbols to values: the same graph with every
// symbolic dim (in types and in attributes: slice bounds, reshape shapes,
// iota lengths, mask sizes) evaluated, types inferred again. The JIT traces
// once with symbols and specializes per compiled size (bucketed dims); the
// compiler and the device programs specialize to the sizes of a call.
#pragma once

#include "ir/graph.h"

namespace tj {

// Throws tj::Error if a symbol of `g` is not bound in `env`.
Graph specialize(const Graph& g, const SymEnv& env);

}  // namespace tj
