// Whether a traced function may run on inputs padded up to a bucket size.
#pragma once

#include <string>

#include "ir/graph.h"

namespace tj {

// Why padding `g`'s symbolic dims up to a bucket would change its real
// results whatever the function masks (empty if nothing does): a concat or
// slice along a symbolic axis (the padding lands inside the data, or the
// bounds assume a size), a mean over one (it divides by the padded size), a
// reshape that mixes a symbolic axis with others (the padding moves).
// Reductions, softmax and matmuls over symbolic axes are the function's to
// mask (with real_size or a causal mask).
std::string bucketing_hazard(const Graph& g);

}  // namespace tj
