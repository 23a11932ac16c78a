// Graph passes. Each is one function in its own file; it rewrites the graph
// in place and returns whether anything changed. Every pass keeps the graph's
// interface (inputs, params, output types) and its semantics; the header
// comment of each .cpp says what it assumes and guarantees.
#pragma once

#include <functional>

#include "ir/graph.h"
#include "reference/interpreter.h"

namespace tj {

struct PassOptions {
  // Values for `freeze`: params named here become constants.
  const Bindings* freeze_values = nullptr;
  // Largest constant constant_fold will create, in elements.
  int64_t max_fold_elements = int64_t{1} << 26;
  // The format quantize_weights stores products' constant weights in: f32
  // (as they are), bf16, or i8 (per output channel).
  DType weights = DType::f32;
};

bool dce(Graph& g, const PassOptions& o);                // bit-exact
bool cse(Graph& g, const PassOptions& o);                // bit-exact
bool freeze(Graph& g, const PassOptions& o);             // bit-exact
bool constant_fold(Graph& g, const PassOptions& o);      // bit-exact w.r.t. the interpreter in the graph's dtypes
bool simplify(Graph& g, const PassOptions& o);           // bit-exact
bool fold_norm_weights(Graph& g, const PassOptions& o);  // reassociates: ~1 ulp
bool fold_conv_affine(Graph& g, const PassOptions& o);   // reassociates: ~1 ulp
bool match_pools(Graph& g, const PassOptions& o);       // bit-exact: max pooling's window form as one max_pool
bool assign_layouts(Graph& g, const PassOptions& o);     // bit-exact: convolutions and the values between them channels last
bool pack_conv_weights(Graph& g, const PassOptions& o);  // bit-exact: conv weights stored 16 output channels side by side
bool fold_conv_pads(Graph& g, const PassOptions& o);  // bit-exact: a conv of a zero-padded input (concats of +0 splats) reads the input, the pads its own
bool sink_gathers(Graph& g, const PassOptions& o);    // bit-exact: pointwise ops on values gathered alike computed before the gather, where it enlarges
bool trim_conv_taps(Graph& g, const PassOptions& o);  // bit-exact: a conv's kernel offsets that read only padding, for every output, dropped (finite constant weights)
bool stride_matmul_weights(Graph& g, const PassOptions& o);  // bit-exact: products' constant weights whose rows are 4 KB apart stored transposed
bool fold_input_scale(Graph& g, const PassOptions& o);   // reassociates: ~1 ulp; a conv input's per-channel scale onto its packed weights, per call
bool winograd_weights(Graph& g, const PassOptions& o);   // exact in the IR (the CPU kernel rounds otherwise): 3x3 convs' weights in the Winograd domain
bool merge_matmuls(Graph& g, const PassOptions& o);      // bit-exact w.r.t. the interpreter
bool match_attention(Graph& g, const PassOptions& o);    // reassociates: ~1 ulp
bool quantize_weights(Graph& g, const PassOptions& o);   // changes values: the weights' format
bool decompose(Graph& g, const PassOptions& o);          // ~1 ulp
bool lower(Graph& g, const PassOptions& o);              // exact: ops without kernels (Fuse::lower) into primitives
bool needs_lowering(const Graph& g);                     // whether the graph has such ops
bool lower_convs(Graph& g, const PassOptions& o);        // ~1 ulp: convolutions as windows and matmuls (targets without a conv kernel)
bool lower_convs_where(Graph& g, const std::function<bool(const Node&)>& which);  // those `which` selects

// Sharding propagation (propagate_shardings.cpp): every value of a graph
// with a mesh gets a sharding, from the annotated ones through the ops'
// factor rules; annotated values keep theirs. Returns what it chose for each
// value it split or made partial, and why (value -1: a conflict it noted).
struct ShardingChoice {
  ValueId value;
  std::string why;
};
std::vector<ShardingChoice> propagate_shardings(Graph& g);

// The collectives a graph's shardings call for (plan_collectives.cpp):
// where an op reads an operand laid out otherwise than it needs, each step
// that moves it there, once per value and step, in graph order; outputs
// that are partial are all-reduced. `slice` is Replicate to Shard: each
// device takes its block, no communication.
struct Collective {
  enum class Kind : uint8_t { all_reduce, reduce_scatter, all_gather, all_to_all, slice };
  Kind kind;
  ValueId value;     // the value moved
  ValueId consumer;  // the op that reads it; -1: a graph output; `value` itself: a slice of its result, computed whole
  Sharding from, to;
  std::vector<std::string> axes;  // the mesh axes it runs over
  int64_t bytes = 0;              // the value's block on one device, before
  int64_t wire_bytes = 0;         // what one device sends (ring algorithms)
};
const char* collective_name(Collective::Kind k);
std::vector<Collective> plan_collectives(const Graph& g);
// One line per collective, with the printer's value names:
// "all_reduce %2 for add %3 over tp: f32[8,16] partial(tp) -> f32[8,16], 512 B, 512 B sent"
std::string collectives_report(const Graph& g, const std::vector<Collective>& plan);

}  // namespace tj
