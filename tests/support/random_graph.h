// Random small graphs from the op set, for fuzzing passes (and, later, code
// generation) against the interpreter. Deterministic per seed.
#pragma once

#include <cstdint>

#include "ir/graph.h"

namespace tj::testing {

Graph random_graph(uint64_t seed, DType dtype = DType::f64, int steps = 14);

}  // namespace tj::testing
