// tensorjit/onnx.h over the importer (src/frontend/onnx).
#include "tensorjit/onnx.h"

#include "frontend/onnx/import.h"

namespace tj {

OnnxModel load_onnx(const std::string& path, const OnnxOptions& o) {
  onnx_import::ImportOptions io;
  io.known_inputs = o.known_inputs;
  onnx_import::OnnxModel m = onnx_import::import_file(path, io);
  return {TracedGraph(std::move(m.graph)), std::move(m.params), std::move(m.output_names), m.opset};
}

}  // namespace tj
