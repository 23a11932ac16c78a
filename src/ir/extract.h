// A run of a graph's nodes as a graph of its own: what a graph break and the
// host program (around control flow) compile.
#pragma once

#include <functional>

#include "ir/graph.h"

namespace tj {

// The nodes [begin, end) of `g` (inputs, params and constants among them
// skipped), computing `outs`. Every value they read from outside the range,
// and every input, param or constant, is brought in once by `outside(s, v)`,
// which adds it to the new graph `s` (as an input, or a copied constant) and
// returns its id there.
Graph extract_range(const Graph& g, size_t begin, size_t end, const std::vector<ValueId>& outs, const std::string& name,
                    const std::function<ValueId(Graph& s, ValueId v)>& outside);

// A copy of `g`, node by node in order: each input, param and constant is
// brought in by `leaf(s, v)`, which adds it to the new graph `s` and returns
// its id there (or -1 to leave out one that no op reads); the ops are copied
// as they are. For renaming or converting a graph's leaves (the caches).
Graph copy_graph(const Graph& g, const std::function<ValueId(Graph& s, ValueId v)>& leaf);

}  // namespace tj
