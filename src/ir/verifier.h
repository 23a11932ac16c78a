// Checks a graph's invariants: SSA (every operand defined before its use),
// operand counts and attribute kinds per the op table, every node's type equal
// to what inference computes, constant sizes, unique input/param names, valid
// outputs. Passes run it after every step in tests and debug builds.
#pragma once

#include "ir/graph.h"

namespace tj {

// Throws tj::Error naming the first offending node.
void verify(const Graph& g);

}  // namespace tj
