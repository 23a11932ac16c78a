// The public ahead-of-time API (tensorjit/compile.h) over the Executable.
#include "tensorjit/compile.h"

#include "compiler/compile.h"
#include "compiler/driver.h"
#include "tensorjit/error.h"
#include "tensorjit/safetensors.h"

namespace tj {

namespace {

Bindings params_from(const TracedGraph& graph, const SafetensorsFile& weights) {
  Bindings params;
  for (const Port& p : graph.params()) {
    const SafetensorsEntry* e = weights.find(p.name);
    if (!e) throw Error("weights " + weights.path() + " have no tensor '" + p.name + "' (a param of " + graph.name() + ")");
    NDArray a = weights.read(p.name);
    if (a.dtype() != p.type.dtype || Shape(a.shape().begin(), a.shape().end()) != p.type.shape)
      throw Error("weights " + weights.path() + ": '" + p.name + "' is " + a.type_str() + ", the graph's param is " + p.type.str());
    params.emplace(p.name, std::move(a));
  }
  return params;
}

}  // namespace

DType weights_format(std::string_view name) {
  if (name == "f32") return DType::f32;
  if (name == "bf16") return DType::bf16;
  if (name == "int8" || name == "i8") return DType::i8;
  throw Error("weights: '" + std::string(name) + "' is not a weight format (f32, bf16 or int8)");
}

Program Program::compile(const TracedGraph& graph, const Bindings& params, const AotOptions& o) {
  CompileOptions co;
  co.passes = o.passes;
  co.program_cache = o.program_cache;
  co.weights = o.weights;
  if (!o.device.empty()) co.device = parse_device(o.device);
  if (!o.fuse) co.fusion = FusionOptions::none();
  Program p;
  p.e_ = std::make_shared<Executable>(tj::compile(graph.graph(), params, co));
  p.inputs_ = graph.inputs();
  p.outputs_ = graph.outputs();
  return p;
}

Program Program::compile(const TracedGraph& graph, const SafetensorsFile& weights, const AotOptions& o) {
  return compile(graph, params_from(graph, weights), o);
}

Program Program::compile(const std::string& name, const TraceFn& fn, const Bindings& params, const AotOptions& o) {
  Tracer t(name);
  return compile(t.finish(fn(t)), params, o);
}

Program Program::compile(const std::string& name, const TraceFn& fn, const SafetensorsFile& weights, const AotOptions& o) {
  Tracer t(name);
  TracedGraph g = t.finish(fn(t));
  return compile(g, params_from(g, weights), o);
}

Program Program::compile(const std::string& name, const TraceFn1& fn, const Bindings& params, const AotOptions& o) {
  return compile(name, TraceFn([&fn](Tracer& t) { return std::vector<Tensor>{fn(t)}; }), params, o);
}

Program Program::compile(const std::string& name, const TraceFn1& fn, const SafetensorsFile& weights, const AotOptions& o) {
  return compile(name, TraceFn([&fn](Tracer& t) { return std::vector<Tensor>{fn(t)}; }), weights, o);
}

std::vector<NDArray> Program::run(Bindings& inputs) { return e_->run(inputs); }
std::vector<NDArray> Program::run(Bindings&& inputs) { return e_->run(inputs); }

Bindings Program::run_named(Bindings& inputs) {
  std::vector<NDArray> out = run(inputs);
  Bindings named;
  for (size_t i = 0; i < out.size(); ++i) named.emplace(outputs_[i].name, std::move(out[i]));
  return named;
}

const std::vector<int>& Program::aliases() const { return e_->output_aliases(); }
bool Program::compiled() const { return e_->stats().compiled; }
size_t Program::kernels() const { return e_->stats().kernels; }
const std::string& Program::source() const { return e_->source(); }

}  // namespace tj
