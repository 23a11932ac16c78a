// The ONNX frontend: a ModelProto (opset 13 and later) into a tensorjit
// graph. Graph inputs keep their names, dim_param dims become size symbols
// (one compilation serves every batch and sequence length), initializers
// become params (with their values), and each node becomes the ops of its
// converter (src/frontend/onnx/ops.cpp). The protobuf format is read with
// the protobuf library and Debian's generated onnx-ml.pb.h (libonnx-dev).
// Malformed files, unsupported opsets and unknown ops are tj::Errors that
// name the file, the node and the op.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "tensorjit/error.h"
#include "tensorjit/ndarray.h"

namespace tj::onnx_import {

struct OnnxModel {
  Graph graph;
  Bindings params;    // the initializers, by name
  std::vector<std::string> output_names;  // the graph outputs' ONNX names, in order
  int64_t opset = 0;  // of the default (ai.onnx) domain
  bool external_data = false;  // some initializer's bytes are in another file
};

struct ImportOptions {
  // Graph inputs whose values are fixed at import: they become constants
  // (a specialization, as a guard on their values would be). For models that
  // take shapes or axes as inputs.
  Bindings known_inputs;
  // Where external-data files are (relative to it); import_file sets it to
  // the model's folder. Empty: external data is an error.
  std::string base_dir;
};

// An operand that must be known at import (a shape, axes, split sizes)
// depends on a graph input: known_inputs can fix it. Carries the graph's
// inputs (not known, not initializers) with their declared types, and its
// output names, for a caller that specializes on values (tj::OnnxFunction),
// and the operand's name (a graph input's, when the operand is one).
class MustBeKnown : public Unsupported {
 public:
  using Unsupported::Unsupported;
  std::string operand;
  // More operands the node needs known, found together (Resize's roi and
  // scales): one specialization covers them all.
  std::vector<std::string> others;
  std::vector<std::pair<std::string, Type>> inputs;
  // The inputs to specialize on: the small integer and bool ones, by their
  // declared types (the model's symbolic dims: not small), and `operand`
  // and `others` when they are inputs.
  std::vector<std::string> deciding() const;
  std::vector<std::string> outputs;
};

OnnxModel import_file(const std::string& path, const ImportOptions& o = {});
// `what` names the model in errors.
OnnxModel import_bytes(std::span<const std::byte> bytes, const std::string& what, const ImportOptions& o = {});

}  // namespace tj::onnx_import
