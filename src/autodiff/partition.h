// The partitioner: a joint graph (autodiff/vjp.h) split into a forward that
// saves some values and a backward that reads them, as AOTAutograd's
// min-cut partitioner does. Every value that does not depend on a cotangent
// may be computed in the forward (and saved, if the backward needs it) or
// recomputed in the backward from saved values. The choice is a minimum cut
// over bytes: saving a value costs its size; matrix products, reductions,
// row kernels, attention, gathers and stores are never recomputed (they
// stay in the forward); elementwise ops, views and generators may be. So
// ReLU's backward saves a bool mask rather than its float input, and
// RMSNorm's saves a per-row statistic rather than the normalized rows.
#pragma once

#include <string>
#include <vector>

#include "autodiff/vjp.h"
#include "ir/graph.h"

namespace tj {

struct Partition {
  // Inputs and params of the original graph; outputs: its outputs, then the
  // saved values.
  Graph forward;
  // Inputs: the saved values ("saved.<k>"), the original inputs and params
  // the backward reads (same names), the cotangents; outputs: the gradients.
  Graph backward;
  struct Saved {
    std::string name;  // the backward's input ("saved.<k>"), the forward's output after g's
    Type type;
    std::string op;    // the op that computes it
    int64_t bytes;     // at the size hint of symbolic dims
  };
  std::vector<Saved> saved;
  std::vector<std::string> reused;  // original inputs and params the backward reads (held by the caller, not saved)
  int64_t saved_bytes = 0;
  // Every value the original graph computes (its nodes but inputs, params
  // and constants): what "save every forward value" would hold.
  int64_t every_forward_value_bytes = 0;
  int recomputed = 0;  // values the backward computes again (of the joint graph, composites decomposed)
};

// `v` from vjp(g, ...) with cotangent inputs. The joint graph is
// partitioned with its composites decomposed (the cut may fall inside a
// norm) and common values merged.
Partition partition(const Graph& g, const Vjp& v, const SymEnv& size_hint = {});

}  // namespace tj
