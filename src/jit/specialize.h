// Binding a graph's size symbols to values: the same graph with every
// symbolic dim (in types and in attributes: slice bounds, reshape shapes,
// iota lengths, mask sizes) evaluated, types inferred again. The JIT traces
// once with symbols and specializes per compiled size (bucketed dims).
#pragma once

#include "ir/graph.h"

namespace tj {

// Throws tj::Error if a symbol of `g` is not bound in `env`.
Graph specialize(const Graph& g, const SymEnv& env);

// Why padding `g`'s symbolic dims up to a bucket would change its real
// results whatever the function masks (empty if nothing does): a concat or
// slice along a symbolic axis (the padding lands inside the data, or the
// bounds assume a size), a mean over one (it divides by the padded size), a
// reshape that mixes a symbolic axis with others (the padding moves).
// Reductions, softmax and matmuls over symbolic axes are the function's to
// mask (with real_size or a causal mask).
std::string bucketing_hazard(const Graph& g);

}  // namespace tj
