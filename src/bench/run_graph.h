// tjc run: a graph (IR text or an ONNX model) on seeded random or given
// inputs, interpreted, compiled, or both and compared; an ONNX model file
// seen before runs its program from the model cache without importing.
// Prints each output's type, sum and L2 norm; writes them as .npy files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tj::bench {

struct GraphRunOptions {
  std::string file, dtype = "f32", output, weight_format = "f32", device = "cpu";
  uint64_t seed = 0;
  std::vector<std::string> syms, sets, inputs, weights;
  bool compiled = false, check = false, interpret = false;
  double tol = -1;  // < 0: by dtype
};

// Throws a tj::Error for bad options or inputs, and "outputs differ" when
// `check` finds the compiled outputs beyond the tolerance.
void run_graph(GraphRunOptions o);

}  // namespace tj::bench
