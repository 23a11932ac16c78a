// The graph as Graphviz DOT, each kernel a cluster, free values (views,
// generators, inputs, weights) outside. `dot -Tsvg` turns it into a picture.
#pragma once

#include <string>

#include "schedule/fusion.h"

namespace tj {

std::string schedule_dot(const Graph& g, const Schedule& s);

}  // namespace tj
