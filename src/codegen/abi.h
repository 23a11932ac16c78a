// The interface between a generated C++ program and the runtime that loads
// it. This file is compiled into the runtime and, as text, into every
// generated program's prelude (cmake/embed_text.cmake), so both sides read
// one declaration. Plain C++ with no includes beyond <cstdint>.
#pragma once

#include <cstdint>

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
};

// A program's functions take one table `void** t`: t[v] is the data of the
// graph's value v (n values), then these slots, t[n + slot].
enum tj_table_slot : int64_t {
  tj_slot_scratch = 0,      // per-thread scratch (thread k's at k times its size)
  tj_slot_runtime = 1,      // the tj_runtime_api
  tj_slot_sizes = 2,        // int64 values of the size symbols, in EmittedProgram::symbols order
  tj_slot_split_small = 3,  // an int: nonzero when small kernels split over the pool
  tj_slots = 4,             // the table holds n + tj_slots entries
};

// What a program's `int tj_status` holds after a call: 0, or why it stopped.
enum tj_status_code : int {
  tj_status_ok = 0,
  tj_status_index_out_of_range = 1,  // a gather, scatter_add or index_put index
  tj_status_division_by_zero = 2,    // integer division or remainder
  tj_status_kv_write_outside = 3,    // a kv_write position outside the cache
  tj_status_gemm_failed = 4,         // the matrix library returned an error
};
