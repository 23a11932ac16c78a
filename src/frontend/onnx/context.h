// What a node converter (ops.cpp) works with: the tracer building the graph,
// the values by ONNX name (with their contents when known at import: the
// initializers, Constant nodes and what is computed from them only), and the
// node's attributes.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>  // defines ONNX_API, includes onnx-ml.pb.h

#include "tensorjit/ndarray.h"
#include "tensorjit/tensor.h"

namespace tj::onnx_import {

struct Value {
  Tensor t;
  std::optional<NDArray> known;  // contents, when known at import (small constants)
};

struct Ctx {
  Tracer& tracer;
  std::map<std::string, Value> values;
  int64_t opset = 0;
  const onnx::NodeProto* node = nullptr;

  [[noreturn]] void fail(const std::string& msg) const;
  // Operand i (an absent optional operand: nullopt).
  bool has_input(size_t i) const;
  const Value& input(size_t i) const;
  Tensor in(size_t i) const { return input(i).t; }
  // Operand i's contents, which must be known at import (shapes, axes).
  const NDArray& known(size_t i, const char* what) const;
  std::vector<int64_t> known_ints(size_t i, const char* what) const;

  const onnx::AttributeProto* attr(const std::string& name) const;
  int64_t attr_int(const std::string& name, int64_t def) const;
  double attr_float(const std::string& name, double def) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> def) const;
  Tensor scalar(double v, DType dt) { return tracer.scalar(v, dt); }
};

DType dtype_of_onnx(int32_t elem_type, const std::string& where);
// A TensorProto's contents (raw_data or the typed fields).
NDArray tensor_value(const onnx::TensorProto& t, const std::string& where);

// The node converters: the op's results, one per node output.
using Converter = std::vector<Value> (*)(Ctx&);
const Converter* find_converter(const std::string& op_type);

}  // namespace tj::onnx_import
