// The interface between a generated C++ program and the runtime that loads
// it. This file is compiled into the runtime and, as text, into every
// generated program's prelude (cmake/embed_text.cmake), so both sides read
// one declaration. Plain C++ with no includes beyond <cstdint>.
#pragma once

#include <cstdint>

// A convolution for the matrix library (src/runtime/library_conv.h): 2-d
// (1-d as one row), f32, in `groups` groups (1; C: depthwise), per image N
// in row blocks of the output. x at its strides (elements, by image,
// channel, row and column: channels last, or the NCHW image a net starts
// from); y [N, OH, OW, M] dense; the weights as the generated kernels read
// them (ir/layout.h): blocks of `w_lanes` outputs, Wq [M/lanes, KH, KW,
// C/groups, lanes] (one group: 64, M padded to a multiple; groups: lanes
// divides their outputs), or taps first (w_lanes 0) [KH*KW, C/groups, M]
// (depthwise, and groups of as many outputs as inputs); the bias, a
// residual r (dense as y) added to the sums, and at most a ReLU or a clip
// after them, applied by the library.
struct tj_conv_desc {
  int64_t N, C, H, W, M, KH, KW, OH, OW, SH, SW, PT, PL, DH, DW;
  int64_t xs[4];
  int64_t groups;      // 1: one group
  int64_t w_lanes;     // the weights' output block, or 0: taps first
  int64_t bias;        // 1: b holds M floats
  int64_t residual;    // 1: r holds [N, OH, OW, M] floats added after the bias
  int64_t act;         // 0: none, 1: ReLU, 2: clip to [lo, hi]
  float lo, hi;
  int64_t row_blocks;  // parts per image: the call's parts are N*row_blocks
};

// What generated code sees of the runtime: the process's thread pool (its
// parallel loops run as parts on it) and its matrix products (generated
// code links no BLAS library of its own). The pool fills one in
// (src/runtime/thread_pool.h).
struct tj_runtime_api {
  // body(ctx, part, parts, thread) for each part in [0, parts), on the pool.
  void (*run)(void* pool, int64_t parts, void (*body)(void*, int64_t, int64_t, int), void* ctx);
  void* pool;
  int64_t threads;  // what per-thread scratch is sized for
  // c[m,n] = op(a) op(b), row-major, on the calling thread; nonzero on failure.
  int (*sgemm)(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t);
  int (*dgemm)(bool, bool, int64_t, int64_t, int64_t, const double*, int64_t, const double*, int64_t, double*, int64_t);
  // The library's convolution: on the calling thread, before the parts,
  // the plan for these weights (made on first use and kept in the
  // program's tj_slot_library state), or null where the library has no
  // fast kernel for it (the code then runs its own form); then per part
  // (image, row block) on the pool, nonzero on failure.
  void* (*conv_plan)(void* state, const tj_conv_desc* d, const float* w);
  int (*conv_part)(void* plan, const float* x, const float* b, const float* r, float* y, int64_t part);
};

// A program's functions take one table `void** t`: t[v] is the data of the
// graph's value v (n values), then these slots, t[n + slot].
enum tj_table_slot : int64_t {
  tj_slot_scratch = 0,      // per-thread scratch (thread k's at k times its size)
  tj_slot_runtime = 1,      // the tj_runtime_api
  tj_slot_sizes = 2,        // int64 values of the size symbols, in EmittedProgram::symbols order
  tj_slot_split_small = 3,  // an int: nonzero when small kernels split over the pool
  tj_slot_library = 4,      // the program's state for the library's kernels (its conv plans)
  tj_slots = 5,             // the table holds n + tj_slots entries
};

// What a program's `int tj_status` holds after a call: 0, or why it stopped.
enum tj_status_code : int {
  tj_status_ok = 0,
  tj_status_index_out_of_range = 1,  // a gather, scatter_add or index_put index
  tj_status_division_by_zero = 2,    // integer division or remainder
  tj_status_kv_write_outside = 3,    // a kv_write position outside the cache
  tj_status_gemm_failed = 4,         // the matrix library returned an error
};
