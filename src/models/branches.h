// The memory-reordering example: independent branches that each compute a
// big [rows, cols] tensor (a matmul) and reduce it to a row sum, traced
// breadth-first (every big tensor first, then every sum), as naive code would.
#pragma once

#include "ir/graph.h"
#include "tensorjit/tensor.h"

namespace tj::models {

Graph trace_branches(int branches = 4, int64_t rows = 2048, int64_t cols = 16384, int64_t inner = 64);

}  // namespace tj::models
