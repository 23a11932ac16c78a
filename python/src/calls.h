// A call of a jit function from Python: arguments in as views, the C++ JIT
// run with the GIL released, results out as arrays. The slow path takes the
// arguments python/tensorjit/_jit.py flattened; the fast path (FastCalls)
// checks and converts the positional arguments of a structure seen before
// itself, with no Python between the call and the compiled code.
#pragma once

#include <nanobind/nanobind.h>

#include <mutex>
#include <string>
#include <vector>

#include "arrays.h"
#include "tensorjit/jit.h"

namespace tj::py {

// A C++ JIT for one argument structure. The lock serializes calls from
// Python threads (taken with the GIL released: a trace retakes the GIL).
struct Jit {
  JitFunction f;
  std::recursive_mutex lock{};
};

// Results as numpy arrays. A result that is an input's memory (a donated
// cache written in place, or an input passed through) is that input's
// Python object (`objects[k]` for `in[k]`), with no copy; another view is
// copied, so that it never outlives the memory it shows.
struct InputMemory {
  const void* data;
  DType dtype;
  std::vector<int64_t> shape;
};
nb::list results(std::vector<NDArray>&& outs, const std::vector<InputMemory>& in = {}, const std::vector<nb::handle>& objects = {});

void bind_calls(nb::module_& m);

}  // namespace tj::py
