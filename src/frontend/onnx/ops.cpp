// The ONNX converter table: one converter per op type, as the ONNX spec
// defines each at opset 13 and later (attributes, defaults, optional
// operands), registered by family (ops_math.cpp, ops_shape.cpp, ops_nn.cpp).
// Each returns the node's results in the order of its outputs.
#include "frontend/onnx/context.h"

#include <algorithm>
#include <cstdint>
#include <optional>

namespace tj::onnx_import {

int64_t axis_of(const Ctx& c, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) c.fail("axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

int64_t static_dim(const Ctx& c, const Tensor& x, int64_t axis, const char* why) {
  const Dim& d = x.shape()[static_cast<size_t>(axis)];
  auto k = d.as_const();
  if (!k) c.unsupported(std::string(why) + " (" + d.str() + ") is not supported yet");
  return *k;
}

std::vector<int64_t> static_shape(const Ctx& c, const Tensor& x, const char* why) {
  std::vector<int64_t> s;
  for (int64_t i = 0; i < x.rank(); ++i) s.push_back(static_dim(c, x, i, why));
  return s;
}

Value known_value(Ctx& c, NDArray a) {
  Tensor t = c.tracer.constant(a);
  return {t, std::move(a)};
}

// Indices that fit 32 bits are an i32 table: a vector gather then reads 16
// floats at a time where 64-bit indices give 8 (the upsample of an ONNX
// Resize, 14 -> 224 over 21 channels: 389 -> 337 us).
Tensor take(Ctx& c, const Tensor& x, int64_t axis, const std::vector<int64_t>& idx) {
  const int64_t n = static_cast<int64_t>(idx.size());
  if (std::all_of(idx.begin(), idx.end(), [](int64_t i) { return i >= INT32_MIN && i <= INT32_MAX; }))
    return gather(x, c.tracer.constant(NDArray::of<int32_t>({n}, std::vector<int32_t>(idx.begin(), idx.end()))), axis);
  return gather(x, c.tracer.constant(NDArray::of<int64_t>({n}, idx)), axis);
}

const Converter* find_converter(const std::string& op_type) {
  static const ConverterTable table = [] {
    ConverterTable t;
    add_math_ops(t);
    add_shape_ops(t);
    add_select_ops(t);
    add_nn_ops(t);
    add_resize_ops(t);
    add_control_ops(t);
    add_attention_ops(t);
    add_quant_ops(t);
    add_loss_ops(t);
    return t;
  }();
  auto it = table.find(op_type);
  return it == table.end() ? nullptr : &it->second;
}

}  // namespace tj::onnx_import
