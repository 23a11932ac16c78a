// Reverse-mode differentiation as a graph transform. vjp(g) is the joint
// graph: g's forward nodes, unchanged (same value ids), then the backward
// nodes each op row's derivative rule (OpDef::grad, ir/differ.h) builds,
// last node first. Its outputs are g's outputs, then one gradient per
// value differentiated with respect to, in order. Broadcasting is summed
// back; symbolic dims flow through (a size needed as a number is read when
// the graph runs). What the forward saves for the backward is the
// partitioner's choice, made later on this one graph.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace tj {

struct VjpSpec {
  // The inputs and params (by name) to differentiate with respect to;
  // empty: every floating-point param.
  std::vector<std::string> wrt;
  // The outputs (by index) whose cotangents flow back; empty: every
  // floating-point output.
  std::vector<size_t> outputs;
  // true: those outputs are scalar losses, seeded with 1; false: each gets
  // a cotangent input "d_out<k>" (k its output index) of its type.
  bool seed_ones = false;
};

struct Vjp {
  Graph joint;
  std::vector<std::string> wrt;         // as resolved, in the order of the gradient outputs
  std::vector<std::string> cotangents;  // the cotangent inputs (none when seeded with ones)
  size_t forward_outputs = 0;           // the joint graph's first outputs are g's
};

// Throws tj::Error for a name that is not a floating-point input or param,
// an output that is not floating point (or, seeded with ones, not a single
// element), and tj::Unsupported naming an op a gradient must flow through
// that has no derivative rule.
Vjp vjp(const Graph& g, const VjpSpec& spec = {});

}  // namespace tj
