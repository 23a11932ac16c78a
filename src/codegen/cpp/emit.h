// The C++ emitter: one function per kernel of a fused schedule, specialized
// to its shapes and dtypes, plus one per graph output that copies it out.
//
// Generated functions take the buffer table `void** t`: t[v] is the address
// of value v's data for every value held in memory (inputs, params,
// constants, planned kernel outputs and kernel-local temporaries); t[n] is
// per-thread scratch for rowwise kernels; t[n+1] holds 64 bytes: the team
// barrier's state (ints 0 and 1, zeroed) and the most threads any parallel
// region may use (int 2: what the scratch was sized for). Reads through views, generators and
// free gathers are index arithmetic (strided where the view chain allows, div
// and mod otherwise), never copies.
//
// Per kernel kind:
//   pointwise  one loop nest over the iteration space, every elementwise op
//              in registers; stores (concat, kv_write) as copy loops after it
//   rowwise    a loop over rows; row-space ops into per-thread row scratch,
//              reductions and per-row ops as scalars
//   reduction  a loop over the input accumulating into the output
//   matmul     OpenBLAS GEMM per batch (GEMV for one row), then the epilogue
//              over the output while it is in cache
//   attention  online-softmax flash attention tiled over keys, causal and
//              grouped-query, never materializing the scores
//
// A small program (no kernel big enough for a parallel region of its own)
// also gets `tj_run(t)`: the whole call as one OpenMP team, GEMVs split over
// output columns and attention over heads, the same share for each thread on
// every call (so weights stay in that core's cache), spinning barriers
// between kernels. Each kernel symbol still runs its whole kernel alone.
#pragma once

#include <string>
#include <vector>

#include "schedule/fusion.h"

namespace tj {

struct EmittedProgram {
  std::string source;
  std::vector<std::string> kernel_symbols;  // one per kernel, in schedule order
  std::vector<std::string> output_symbols;  // one per graph output
  std::vector<ValueId> temporaries;         // values held in memory inside one kernel only
  std::vector<int64_t> temporary_offsets;   // byte offset of each in the temporary region
  int64_t temporary_bytes = 0;              // size of that region
  int64_t scratch_bytes_per_thread = 0;     // row scratch, per OpenMP thread
  std::string run_symbol;                   // "tj_run" when the program runs as one team, else empty
};

// Values in memory: inputs, params, non-splat constants, every kernel output,
// and the temporaries listed in the result (kernel-local, reused across
// kernels: each kernel's temporaries start at offset 0 of one region).
// Generated code sets the int `tj_status` to a nonzero code when a runtime
// index is out of range (a gather index, a kv_write position).
// Throws tj::Error for what it cannot generate (symbolic shapes, bf16/f16).
EmittedProgram emit_cpp(const Graph& g, const Schedule& s);

}  // namespace tj
