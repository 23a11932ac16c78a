// tensorjit/onnx.h over the importer (src/frontend/onnx).
#include "tensorjit/onnx.h"

#include <map>
#include <optional>

#include "compiler/compile.h"
#include "compiler/model_cache.h"
#include "frontend/onnx/import.h"
#include "ir/verifier.h"

namespace tj {

OnnxModel load_onnx(const std::string& path, const OnnxOptions& o) {
  onnx_import::ImportOptions io;
  io.known_inputs = o.known_inputs;
  onnx_import::OnnxModel m = onnx_import::import_file(path, io);
  return {TracedGraph(std::move(m.graph)), std::move(m.params), std::move(m.output_names), m.opset};
}

OnnxProgram compile_onnx(const std::string& path, const OnnxOptions& o, const AotOptions& a) {
  // The model cache keys the file alone: other options import every time.
  const bool cacheable = o.known_inputs.empty() && a.passes.empty() && a.fuse && a.program_cache;
  const std::string variant = a.weights == DType::f32 ? "" : "weights " + std::string(dtype_name(a.weights));
  if (cacheable)
    if (std::optional<ModelEntry> entry = load_model_entry(path, variant))
      if (std::optional<Executable> exe = tj::compile_prepared(entry->program_key)) {
        verify(entry->graph);
        TracedGraph traced(std::move(entry->graph));
        OnnxProgram r{Program{}, std::move(entry->output_names), false};
        r.program.e_ = std::make_shared<Executable>(std::move(*exe));
        r.program.inputs_ = traced.inputs();
        r.program.outputs_ = traced.outputs();
        return r;
      }
  onnx_import::ImportOptions io;
  io.known_inputs = o.known_inputs;
  onnx_import::OnnxModel m = onnx_import::import_file(path, io);
  Program p = Program::compile(TracedGraph(m.graph), m.params, a);
  if (cacheable && !m.external_data) store_model_entry(path, m.graph, m.output_names, p.e_->stats().program_key, variant);
  return {std::move(p), std::move(m.output_names), true};
}

// ---- OnnxFunction -----------------------------------------------------------

struct OnnxFunction::Impl {
  std::string path;
  OnnxOptions options;
  AotOptions aot;
  size_t limit = 8;
  std::vector<std::string> inputs, outputs, specialized;
  bool imported = true;
  std::map<std::string, Program> programs;  // the specialized inputs' values (their bytes) -> program
};

namespace {

// The key of the specialized inputs' values: dtype, shape and bytes of each.
std::string values_key(const std::vector<std::string>& names, const Bindings& in) {
  std::string k;
  for (const std::string& n : names) {
    const NDArray& a = in.at(n);
    k += n + ":" + a.type_str() + ":";
    k.append(static_cast<const char*>(a.raw()), a.nbytes());
    k += '\0';
  }
  return k;
}

}  // namespace

OnnxFunction::OnnxFunction(std::string path, OnnxOptions o, AotOptions a, size_t limit) : p_(std::make_shared<Impl>()) {
  p_->path = std::move(path), p_->options = std::move(o), p_->aot = std::move(a), p_->limit = limit;
  try {
    OnnxProgram prog = compile_onnx(p_->path, p_->options, p_->aot);
    for (const Port& port : prog.program.inputs()) p_->inputs.push_back(port.name);
    p_->outputs = prog.output_names;
    p_->imported = prog.imported;
    p_->programs.emplace("", std::move(prog.program));
  } catch (const onnx_import::MustBeKnown& e) {
    p_->outputs = e.outputs;
    for (const auto& [name, type] : e.inputs) p_->inputs.push_back(name);
    p_->specialized = e.deciding();
    if (p_->specialized.empty()) throw;
  }
}

std::vector<NDArray> OnnxFunction::operator()(const Bindings& inputs) {
  Impl& s = *p_;
  for (const std::string& n : s.inputs)
    if (!inputs.count(n)) throw Error("onnx: " + s.path + ": missing input '" + n + "'");
  std::string key = s.specialized.empty() ? "" : values_key(s.specialized, inputs);
  auto it = s.programs.find(key);
  if (it == s.programs.end()) {
    if (s.programs.size() >= s.limit)
      throw Error("onnx: " + s.path + ": " + std::to_string(s.limit) + " programs compiled for values of the inputs that decide its shapes (" +
                  s.specialized.front() + (s.specialized.size() > 1 ? ", ..." : "") + "); pass values seen before, or a model whose shapes are constants");
    OnnxOptions o = s.options;
    for (const std::string& n : s.specialized) o.known_inputs[n] = inputs.at(n);
    it = s.programs.emplace(key, compile_onnx(s.path, o, s.aot).program).first;
  }
  Bindings in;
  for (const Port& port : it->second.inputs()) in.emplace(port.name, inputs.at(port.name));
  return it->second.run(in);
}

const std::vector<std::string>& OnnxFunction::input_names() const { return p_->inputs; }
const std::vector<std::string>& OnnxFunction::output_names() const { return p_->outputs; }
const std::vector<std::string>& OnnxFunction::specialized() const { return p_->specialized; }
size_t OnnxFunction::programs() const { return p_->programs.size(); }
bool OnnxFunction::imported() const { return p_->imported; }

}  // namespace tj
