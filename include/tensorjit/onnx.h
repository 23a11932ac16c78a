// ONNX models as tensorjit graphs (docs/onnx.md): the graph, its weights
// (the initializers, external data included) and its output names, ready
// for tj::Program::compile.
//
//   tj::OnnxModel m = tj::load_onnx("minilm.onnx");
//   tj::Program p = tj::Program::compile(m.graph, m.params);   // symbolic batch and sequence
//   std::vector<tj::NDArray> out = p.run(inputs);               // m.output_names[i] names out[i]
//
// Malformed files throw tj::Error; valid models using what tensorjit does not
// support (an op, an element type, an opset) throw tj::Unsupported, naming it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorjit/graph.h"
#include "tensorjit/ndarray.h"

namespace tj {

struct OnnxModel {
  TracedGraph graph;
  Bindings params;                        // the initializers, by name
  std::vector<std::string> output_names;  // the graph outputs' ONNX names, in order
  int64_t opset = 0;                      // of the default domain
};

struct OnnxOptions {
  // Graph inputs fixed at import (they become constants): for models whose
  // shapes or axes are inputs.
  Bindings known_inputs;
};

OnnxModel load_onnx(const std::string& path, const OnnxOptions& o = {});

}  // namespace tj
