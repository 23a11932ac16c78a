// The GPU emitter: a fused schedule as GPU kernels (codegen/gpu/renderer.h),
// rendered for OpenCL C or CUDA C, and the launch list that runs them.
//
// A schedule's kernel becomes one launch or a few (a GPU kernel ends where
// every work-item must see every other's writes):
//   pointwise  a work-item per element of the iteration space; each store
//              (concat, kv_write, scatter_add) a launch of its own after it
//   rowwise    a work-group per row: row-space ops in scratch rows, each
//              work-item taking every G-th element; reductions and norms
//              through work-group memory (tj_red), in double
//   reduction  a work-item per output element, summing in double
//   matmul     16x16 output tiles, operands staged through work-group
//              memory in 16-deep slices of K; the epilogue in registers
//   attention  a work-item per (batch, head, query) row: online softmax over
//              the keys, never materializing the scores
//   conv       an implicit GEMM per (image, group) in 16x16 tiles of
//              (positions, output channels), the windows made as they are
//              staged (zeros in the padding); the bias and epilogue in
//              registers. Either layout, any number of spatial dims
//   pool       (max, sum) a work-item per output element over its window's taps
// Reads go through views, broadcasting, generators and gathers as index
// arithmetic, as in the C++ backend: both emitters build on the shared
// value reading (codegen/value_reader.h), this one with GPU C's spellings
// and kernels of its own.
//
// Buffers: p<v> for value v; p<n> (n = the graph's size) is the scratch;
// p<n+1+i> is output i's copy, written by outputs[i].
#pragma once

#include <string>
#include <vector>

#include "codegen/gpu/renderer.h"
#include "codegen/program.h"
#include "schedule/fusion.h"

namespace tj::gpu {

struct Launch {
  std::string name;
  std::vector<ValueId> buffers;  // its buffer parameters, in order
  // Work-items: items times, per (d, t) of `tiles`, d / t rounded up; run
  // in groups of `group` (the last one partly past the end).
  Dim items = 1;
  std::vector<std::pair<Dim, int64_t>> tiles;
  int group = 64;
  int kernel = -1;               // the schedule's kernel it is part of (-1: index checks)
};

struct Program {
  Target target = Target::opencl;
  std::string source;               // the prelude and every launch's kernel
  std::vector<Launch> checks;       // free gathers' indices, before the kernels (their tj_status stops the call)
  std::vector<Launch> launches;     // in order
  std::vector<Launch> outputs;      // per graph output, a copy into its buffer
  // Temporaries (kernel-local values in memory), scratch and size symbols,
  // as the C++ backend's (lay_out_temporaries); scratch_sizes are bytes in
  // all, not per thread.
  EmittedProgram layout;
};

// Throws tj::Error for what the GPU backend does not generate (float8 and
// sub-byte types, flash attention's backward, integer products).
Program emit(const Graph& g, const Schedule& s, Target target, const SymEnv& hint = {});

}  // namespace tj::gpu
