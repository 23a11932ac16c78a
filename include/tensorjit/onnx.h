// ONNX models as tensorjit graphs (docs/onnx.md): the graph, its weights
// (the initializers, external data included) and its output names, ready
// for tj::Program::compile.
//
//   tj::OnnxModel m = tj::load_onnx("minilm.onnx");
//   tj::Program p = tj::Program::compile(m.graph, m.params);   // symbolic batch and sequence
//   std::vector<tj::NDArray> out = p.run(inputs);               // m.output_names[i] names out[i]
//
// or, to start warm the next time (no import: the program from the cache):
//
//   tj::OnnxProgram c = tj::compile_onnx("minilm.onnx");
//   std::vector<tj::NDArray> out = c.program.run(inputs);
//
// Malformed files throw tj::Error; valid models using what tensorjit does not
// support (an op, an element type, an opset) throw tj::Unsupported, naming it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorjit/compile.h"
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

struct OnnxProgram {
  Program program;
  std::vector<std::string> output_names;  // the graph outputs' ONNX names, in order
  bool imported = false;                  // false: the program came from the cache, the file was not read
};

// The model compiled with its own weights: Program::compile(load_onnx(path))
// the first time, and for the same file, unchanged, later (in this process
// or another, under the same TJ_CACHE_DIR), the program from the cache
// without importing the file: the warm start of `tjc run`. Models with
// external data, known inputs or non-default AotOptions are imported every
// time.
OnnxProgram compile_onnx(const std::string& path, const OnnxOptions& o = {}, const AotOptions& a = {});

// A model some of whose shapes, axes or counts arrive as graph inputs (a
// Reshape's or Expand's shape, Slice's starts, TopK's k, Trilu's k that
// are not constants of the model): compiled per value of those inputs, as
// tj::jit specializes on Python numbers. A call with values seen before
// runs their program (the values are its guard); new values import the
// model with them fixed and compile it, up to `limit` programs (then an
// error says so). The inputs specialized are the model's integer and bool
// inputs of at most 4096 elements; a model that needs none is compiled
// once, at construction, as compile_onnx does.
class OnnxFunction {
 public:
  explicit OnnxFunction(std::string path, OnnxOptions o = {}, AotOptions a = {}, size_t limit = 8);
  // Every graph input by name (the specialized ones included).
  std::vector<NDArray> operator()(const Bindings& inputs);
  const std::vector<std::string>& input_names() const;  // the graph's inputs, in order
  const std::vector<std::string>& output_names() const;
  // The inputs the programs are specialized on (empty: one program).
  const std::vector<std::string>& specialized() const;
  size_t programs() const;  // compiled so far
  bool imported() const;    // false: the one program came from the cache

  struct Impl;

 private:
  std::shared_ptr<Impl> p_;
};

}  // namespace tj
