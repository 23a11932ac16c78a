// The C++ emitter: one function per kernel of a fused schedule, specialized
// to its shapes and dtypes, plus one per graph output that copies it out.
//
// Generated functions take the buffer table `void** t`: t[v] is the address
// of value v's data for every value held in memory (inputs, params,
// constants, planned kernel outputs and kernel-local temporaries), then the
// slots of codegen/abi.h: per-thread scratch, the process's runtime (a
// tj_runtime_api: parallel loops run as parts on its pool, whose thread
// count is what the scratch was sized for, and matrix products call its
// GEMM), the size symbols' values, and whether small kernels split over the
// pool (splits_small_kernels). Reads through views, generators and
// free gathers are index arithmetic (strided where the view chain allows, div
// and mod otherwise), never copies.
//
// Per kernel kind:
//   pointwise  one loop nest over the iteration space, every elementwise op
//              in registers; stores (concat, kv_write) as copy loops after it
//   rowwise    a loop over rows; row-space ops into per-thread row scratch,
//              reductions and per-row ops as scalars
//   reduction  a loop over the input accumulating into the output
//   matmul     the runtime's GEMM per batch (GEMV for one row), then the epilogue
//              over the output while it is in cache
//   attention  online-softmax flash attention tiled over keys, causal and
//              grouped-query, never materializing the scores
//
// A program whose small GEMVs and attentions add up to enough work (a decode
// step) splits them over the pool, the same share for each thread on every
// call, so that weights stay in that core's cache (`tj_team`); each kernel
// symbol runs its whole kernel.
//
// The emitter itself: codegen/cpp/emitter.h, emit.cpp and one file per
// kernel kind under codegen/cpp/kernels/, over codegen/value_reader.h.
#pragma once

#include <string>
#include <vector>

#include "codegen/program.h"
#include "schedule/fusion.h"

namespace tj {

// The temporary region at some sizes: each kernel's temporaries stacked from
// offset 0, each rounded up to 64 bytes; `bytes` is the largest stack.
struct TemporaryLayout {
  std::vector<int64_t> offsets;
  int64_t bytes = 0;
};
TemporaryLayout lay_out_temporaries(const EmittedProgram& p, const SymEnv& sizes);
// Scratch per thread at some sizes: the largest need, rounded up to 64 bytes.
int64_t scratch_bytes_per_thread(const EmittedProgram& p, const SymEnv& sizes);

// Values in memory: inputs, params, non-splat constants, every kernel output,
// and the temporaries listed in the result (kernel-local, reused across
// kernels: each kernel's temporaries start at offset 0 of one region).
// Generated code sets the int `tj_status` to a nonzero code when a runtime
// index is out of range (a gather index, a kv_write position).
// Sizes may be symbolic: generated loops, strides and library calls read the
// symbols' values at run time from the tj_slot_sizes slot (int64, in `symbols` order), and
// the memory the program needs is a formula (temporary_sizes,
// scratch_sizes). Decisions between code shapes (parallel or not, one team
// or not) are taken at `hint` (a symbol not given counts as 64).
// Throws tj::Error for what it cannot generate (bf16/f16; symbolic head
// counts or value width in flash_attn).
// `tune`: also the candidate schedules of matrix-vector products and
// attentions (EmittedProgram::tunable).
EmittedProgram emit_cpp(const Graph& g, const Schedule& s, const SymEnv& hint = {}, bool tune = false);

}  // namespace tj
