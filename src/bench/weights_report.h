// tjc bench --weights: the matrix products' weights stored as f32, bf16 and
// int8, side by side in one process: time per call beside the measured
// stream bandwidth, and the outputs of each format against f32's; for the
// whole Llama, greedy tokens and the log-likelihood of a fixed sequence.
#pragma once

#include <nlohmann/json.hpp>

#include <vector>

#include "bench/model.h"
#include "ir/graph.h"

namespace tj {
class Executable;
}

namespace tj::bench {

// The bytes of weights a call of `e` reads: `params` as given (the RoPE
// tables aside: a call reads a row of them), each converted weight at its
// own size, and int8's scales.
int64_t stored_weight_bytes(const Executable& e, const Bindings& params);

struct FormatsArgs {
  std::vector<DType> formats;  // f32 first: the others are compared with it
  double budget = 2.0;         // seconds of calls per format, over all rounds
  int rounds = 5;              // interleaved, each with its own bandwidth measurement
  double compute_limit_s = 0;  // the FLOPs over the sgemm peak: the limit when it is the larger
};

// `graph` compiled with each format and timed in interleaved rounds. Per
// format: weight bytes, median and p90 per call, the limit (weight bytes /
// stream bandwidth, measured in each round, or compute_limit_s where that is
// larger: a prefill), and its first output against
// the f32 interpreter's (max and mean relative error, least cosine of a
// row), and the compiled outputs against the interpreter running the
// optimized graph, whose weights are the converted ones (the kernels' error).
nlohmann::json weight_formats(const Graph& graph, const Bindings& params, const Bindings& inputs, const FormatsArgs& a);
void print_weight_formats(const nlohmann::json& report);

// The whole Llama of `trace`'s config and layers, with seeded weights, per
// format against f32: greedy tokens over `steps` after a 16-token prompt,
// each format following its own tokens, and the mean log-likelihood of the
// prompt and f32's continuation, read back in one prefill.
nlohmann::json model_accuracy(const ModelSpec& trace, const std::vector<DType>& formats, int steps);
void print_model_accuracy(const nlohmann::json& report);

}  // namespace tj::bench
