// The models the benchmarks and demos run: a traced one of src/models (the
// tiny Llama and its relatives, by config, mode and sizes) or a graph read
// from an IR file or an ONNX model, with seeded weights and inputs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/options.h"
#include "ir/graph.h"

namespace tj::bench {

// Bounds of a spec's sizes, so that no size product overflows downstream.
constexpr int64_t kMaxLayers = 1024, kMaxBatch = 1024, kMaxTokens = int64_t{1} << 20;

struct ModelSpec {
  std::string model = "llama-layer", config = "tiny", mode = "prefill", tokens, kv_len, dtype = "f32";
  std::string ir;  // read this IR file (or .onnx model) instead of tracing a model
  // With ir: sizes of its symbolic dims (NAME=N) and scalar values of
  // inputs (NAME=V), for what makes inputs (bench, codegen).
  std::vector<std::string> syms, sets;
  int64_t layers = 0;
  int64_t batch = 1;
  bool flash = false;
  std::string weights = "f32";  // the compiled products' weight format: f32, bf16, int8 (or "all" in bench)
  std::string device = "cpu";   // where compiled code runs: a name of tj::device_names()
};

Graph trace_model(const ModelSpec& spec);
// The tjc options that give `spec` again, for a fresh tjc process.
std::vector<std::string> spec_argv(const ModelSpec& spec);

// The format of the program that is benchmarked ("all" compares the others
// with f32, which is benchmarked), and the options that compile it.
DType main_format(const ModelSpec& spec);
CompileOptions compile_options(const ModelSpec& spec);

struct Model {
  Graph graph;
  Bindings params, inputs;
  SymEnv sizes;  // from spec.syms
};
// Seeded weights with real RoPE tables; inputs for the spec's mode. An ONNX
// model brings its weights (the initializers); its inputs are seeded random
// (indices within their tables), syms and sets applied. `trace_seconds`:
// the time the trace or import took.
Model make_model(const ModelSpec& spec, double* trace_seconds = nullptr);

}  // namespace tj::bench
