// Fusion: partitions a graph into kernels with TorchInductor-style rules.
// What an op can join is its op row's `fuse` class (src/ir/ops/); the only
// op named here is kv_write, whose cache is written in place when it is a
// donated input (an alias the schedule records).
//
//   - Free values are never kernels: inputs, params, constants, views
//     (reshape permute expand slice squeeze unsqueeze), generators (iota,
//     causal_mask), integer index math on those, gathers whose indices
//     are free (an indirect load), and casts of constants and params
//     (weights stored narrower, read converted). Consumers read through them: a view costs
//     no bytes of its own; reading through it touches the base buffer.
//   - matmul, conv and flash_attn are kernels of their own; elementwise consumers
//     with the same iteration space join as an epilogue (rule `epilogue`).
//   - An elementwise op joins the kernel of its latest producer when they
//     share the iteration space (rule `pointwise`).
//   - A last-axis reduction joins the pointwise kernel producing its input,
//     which becomes a rowwise kernel; elementwise ops on the row or on the
//     per-row result then join too (rule `rowwise`).
//   - Stores (concat, kv_write) join the pointwise kernel producing all their
//     data; kv_write writes into its cache in place.
//   - An op only ever joins the kernel of its latest dependency, so fusion
//     never creates a cycle between kernels.
//   - Optionally (rule `horizontal`), independent pointwise kernels with the
//     same iteration space merge.
//   - Donations (JAX's donate_argnums): an output the caller asked to have
//     written into an input's array is, when its kernel can do that safely
//     (below); the other kernels reading that input are ordered first.
// Kernels come out in a valid execution order.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tj {

enum class KernelKind : uint8_t { pointwise, rowwise, reduction, matmul, attention, conv, pool };
std::string_view kernel_kind_name(KernelKind k);

struct FusionOptions {
  bool epilogue = true;
  bool pointwise = true;
  bool rowwise = true;
  bool horizontal = false;
  SymEnv size_hint;  // typical sizes of symbolic dims, for byte and flop counts
  // A sum or mean over every spatial axis of a channels-last conv's value
  // (global average pooling, a squeeze-excitation's squeeze) joins the
  // conv's kernel, summed in its epilogue: the C++ emitter's rule (its
  // conv kernels keep partial sums per block of positions).
  bool conv_reductions = false;
  // The C++ emitter's vector in floats, or 0: a channels-last grouped conv
  // whose groups divide no such vector (ir/layout.h, grouped_by_library:
  // the matrix library's by rule) keeps only the library's epilogue in its
  // kernel (fusion.cpp, library_width_conv). GPUs have a form for every width.
  int64_t library_vector_floats = 0;
  static FusionOptions none() { return {false, false, false, false, {}, false, 0}; }
};

struct Kernel {
  KernelKind kind;
  std::vector<ValueId> ops;      // computed here, in order
  std::vector<ValueId> inputs;   // buffers read: graph inputs, params, constants, other kernels' outputs
  std::vector<ValueId> outputs;  // values written to memory
  Shape space;                   // iteration space
  int64_t bytes_read = 0, bytes_written = 0, flops = 0;
  bool writes(ValueId v) const { return std::find(outputs.begin(), outputs.end(), v) != outputs.end(); }
};

// Output `output` of the graph written into the array of input `input`,
// which the caller gives up (a parameter and its update, an optimizer's
// state). A donation that cannot be honored leaves the output in its own
// buffer (TJ_LOG=fusion says why); Executable::output_aliases() tells.
struct Donation {
  size_t output;
  std::string input;
};

struct Schedule {
  std::vector<Kernel> kernels;
  std::vector<int> kernel_of;  // per value: its kernel, or -1 for free values
  // Per value: the graph input whose buffer it is written into, or -1. A
  // kv_write writes into its cache in place when the cache is a graph input
  // that nothing else reads (and that is not itself returned): the value is
  // that input's array, donated; otherwise it copies the cache and writes
  // the rows into the copy. A donated output (Donation) is written into its
  // input, after every other kernel that reads the input. Decided once, by
  // fuse(); everything after fusion (planning, ordering, emission, the
  // executable) reads it from here.
  std::vector<ValueId> in_place;
  bool writes_in_place(ValueId v) const { return in_place[static_cast<size_t>(v)] >= 0; }
};

// Symbolic sizes are fused like any other; bytes and flops are counted at
// o.size_hint (a symbol not given counts as 64). Throws tj::Error for a
// donation naming no output or input, or pairing values of different types.
Schedule fuse(const Graph& g, const FusionOptions& o = {}, const std::vector<Donation>& donate = {});

// A conv kernel's sum over its positions (FusionOptions::conv_reductions):
// v, an op of K, that K adds up in its epilogue rather than computing at
// each index of its space.
bool sums_in_epilogue(const Graph& g, const Kernel& K, ValueId v);
// The value such a sum adds up: its operand, behind the reshapes that
// merge the positions ([N, H, W, C] as [N, H*W, C]).
ValueId summed_value(const Graph& g, ValueId sum);

// Whether kernel K may write its result v over buffer `b`: K is loops over
// its space (pointwise, or a product's epilogue whose operands are not `b`)
// that read `b` only at the index they write (directly, or through reshapes
// at full size; no gathers, stores, permuted or sliced reads), and not after
// a store that follows v (a store ends the loop that wrote v).
bool overwrites_safely(const Graph& g, const Kernel& K, ValueId v, ValueId b);

// For each kernel in s, the kernels that must run before it: those whose
// results it reads, and, for a kernel writing a donated input in place, every
// other kernel reading that input.
std::vector<std::vector<int>> kernel_dependencies(const Graph& g, const Schedule& s);

// The buffer a value's data lives in: follows views (and free gathers' tables)
// back to a materialized value. Generators and splat constants have none (-1).
ValueId base_buffer(const Graph& g, ValueId v);


}  // namespace tj
