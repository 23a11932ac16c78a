// Ahead-of-time compilation: a traced graph (or a function that traces one)
// and its weights become a Program: generated C++ kernels, built and cached,
// run from a static plan with fixed buffers. Without a C++ compiler a Program
// runs on the interpreter (compiled() says which).
//
//   tj::SafetensorsFile weights("mlp.safetensors");
//   tj::Program p = tj::Program::compile("mlp", [&](tj::Tracer& t) {
//     auto x = t.input("x", tj::DType::f32, {tj::Dim::symbol("T"), 64});
//     return std::vector<tj::Tensor>{tj::relu(tj::matmul(x, t.param("w", tj::DType::f32, {64, 64})))};
//   }, weights);
//   tj::Bindings in{{"x", tj::NDArray::of<float>({3, 64}, data)}};
//   std::vector<tj::NDArray> out = p.run(in);
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tensorjit/graph.h"
#include "tensorjit/ndarray.h"
#include "tensorjit/tensor.h"

namespace tj {

class Executable;       // internal: src/runtime/executable.h
class SafetensorsFile;  // tensorjit/safetensors.h

struct AotOptions {
  // Passes by name (docs/passes.md); empty: the default pipeline, weights frozen.
  std::vector<std::string> passes;
  bool fuse = true;           // false: one kernel per op
  bool program_cache = true;  // warm starts skip the passes (under TJ_CACHE_DIR)
  // The matrix products' frozen weights as stored: f32, bf16 (rounded to
  // nearest even), or i8 with a symmetric scale per output channel. The
  // products read them converted, accumulating in f32 (docs/codegen.md).
  DType weights = DType::f32;
  // Where the kernels run: "cpu" (generated C++), "opencl" or "cuda"
  // (docs/codegen.md, GPU code); empty: $TJ_DEVICE, else the CPU. A device
  // that is not present is an error.
  std::string device;
};

// A weight format by name: "f32", "bf16", "int8" (or "i8"); anything else
// is a tj::Error naming the formats.
DType weights_format(std::string_view name);

class Program {
 public:
  // `params`: every param of the graph, by name (they are frozen into the program).
  static Program compile(const TracedGraph& graph, const Bindings& params, const AotOptions& o = {});
  // The params read from a safetensors file by name (dtype and shape checked).
  static Program compile(const TracedGraph& graph, const SafetensorsFile& weights, const AotOptions& o = {});
  // Traces `fn` with a fresh Tracer named `name`, then compiles.
  using TraceFn = std::function<std::vector<Tensor>(Tracer&)>;
  static Program compile(const std::string& name, const TraceFn& fn, const Bindings& params, const AotOptions& o = {});
  static Program compile(const std::string& name, const TraceFn& fn, const SafetensorsFile& weights, const AotOptions& o = {});
  // A function of one result.
  using TraceFn1 = std::function<Tensor(Tracer&)>;
  static Program compile(const std::string& name, const TraceFn1& fn, const Bindings& params, const AotOptions& o = {});
  static Program compile(const std::string& name, const TraceFn1& fn, const SafetensorsFile& weights, const AotOptions& o = {});

  // Every input by name; dtypes and shapes are checked (symbolic dims bind to
  // the sizes given). Inputs that are donated KV caches are written in place:
  // aliases() says which outputs they are.
  std::vector<NDArray> run(Bindings& inputs);
  std::vector<NDArray> run(Bindings&& inputs);
  // The outputs by name (out0, out1, ...).
  Bindings run_named(Bindings& inputs);

  const std::vector<Port>& inputs() const { return inputs_; }
  const std::vector<Port>& outputs() const { return outputs_; }
  // Per output: the index in inputs() of the input whose array holds it after
  // a run (a donated cache, updated in place), or -1.
  const std::vector<int>& aliases() const;
  bool compiled() const;  // false: no C++ compiler was found; runs on the interpreter
  size_t kernels() const;
  const std::string& source() const;  // the generated C++

 private:
  friend struct OnnxProgram compile_onnx(const std::string&, const struct OnnxOptions&, const AotOptions&);
  std::shared_ptr<Executable> e_;
  std::vector<Port> inputs_, outputs_;
};

}  // namespace tj
