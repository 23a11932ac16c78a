// tensorjit/onnx.h over the importer (src/frontend/onnx).
#include "tensorjit/onnx.h"

#include <optional>

#include "compiler/model_cache.h"
#include "frontend/onnx/import.h"
#include "ir/verifier.h"
#include "runtime/executable.h"

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
      if (std::optional<Executable> exe = Executable::compile_prepared(entry->program_key)) {
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

}  // namespace tj
