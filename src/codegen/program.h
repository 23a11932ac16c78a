// A generated program as the runtime receives it: its source, its symbols
// (one per kernel and per output), the temporaries and scratch its kernels
// need (as formulas over the size symbols), and its tunable kernels. The
// C++ emitter (codegen/cpp/emit.h) makes one; a GPU program
// (codegen/gpu/emit.h) carries one as the layout of its buffers.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace tj {

struct EmittedProgram {
  std::string source;
  std::vector<std::string> kernel_symbols;  // one per kernel, in schedule order
  std::vector<std::string> output_symbols;  // one per graph output
  std::vector<ValueId> temporaries;         // values held in memory inside one kernel only (a value may recur, once per kernel)
  std::vector<int> temporary_kernel;        // the kernel each belongs to
  std::vector<Dim> temporary_sizes;         // bytes of each
  std::vector<Dim> scratch_sizes;           // bytes per thread some kernel needs
  std::vector<std::string> symbols;         // the graph's size symbols, in the order of the tj_slot_sizes slot
  std::string check_symbol;                 // "tj_check_indices": free gathers' indices, run first; or empty
  // A decode-sized program: its small GEMVs and attentions split over the
  // pool when the int at the tj_slot_split_small slot is nonzero, else run on the calling thread
  // (the same bits either way; runtime/split_choice.h).
  bool splits_small_kernels = false;
  // With emit_cpp's `tune`: kernels emitted once per candidate schedule
  // (tune/autotune.h measures them). Candidate 0 is the emitter's own
  // choice, kernel_symbols[kernel]; each computes the same values, its sums
  // in another order (within f32 rounding of each other, not bit for bit).
  struct Tunable {
    int kernel = 0;
    std::string signature;             // what the kernel computes, at which sizes (no table slots)
    std::vector<std::string> labels;   // per candidate: its knobs ("rows 16, partials")
    std::vector<std::string> symbols;  // per candidate
  };
  std::vector<Tunable> tunable;
};

}  // namespace tj
