// The reference interpreter: executes any graph op by op, allocating each
// result, with numpy semantics (broadcasting; views materialized). It defines
// what every later stage must compute, and it is the eager baseline compiled
// code is timed against.
//
// Floating-point values are computed in `compute` (f32 or f64): f32 and f64
// tensors are held in that type, bf16/f16 results are rounded to their
// precision after every op. Integer and bool values are held exactly, as
// int64, with two's-complement wrapping to their dtype's width (docs/ir.md
// has the integer and cast semantics). Sums and norms accumulate in double;
// matmul accumulates in `compute`.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "tensorjit/ndarray.h"

namespace tj {


struct InterpretOptions {
  DType compute = DType::f32;  // f32 or f64
  // Floating outputs in their declared dtypes (rounded from the compute
  // dtype), as compiled code gives them: what a caller that stands in for
  // compiled code (the JIT's interpreted entries, no compiler) wants.
  bool declared_dtypes = false;
};

// Inputs and params by name. Returns the graph's outputs: floating outputs in
// the compute dtype (or their own with declared_dtypes), others in their own dtype. Throws tj::Error for missing,
// unknown or mis-shaped inputs and for out-of-range runtime indices.
std::vector<NDArray> interpret(const Graph& g, const Bindings& inputs, const InterpretOptions& opts = {});

// Binds the size symbols of the graph's inputs and params from the arrays'
// shapes, checking every dim (shared with the compiled runtime).
SymEnv bind_symbols(const Graph& g, const Bindings& inputs);

}  // namespace tj
