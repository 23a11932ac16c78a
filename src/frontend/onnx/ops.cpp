// The ONNX converter table: one converter per op type, as the ONNX spec
// defines each at opset 13 and later (attributes, defaults, optional
// operands), registered by family (ops_math.cpp, ops_shape.cpp, ops_nn.cpp).
// Each returns the node's results in the order of its outputs.
#include "frontend/onnx/context.h"

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

Tensor take(Ctx& c, const Tensor& x, int64_t axis, const std::vector<int64_t>& idx) {
  return gather(x, c.tracer.constant(NDArray::of<int64_t>({static_cast<int64_t>(idx.size())}, idx)), axis);
}

Tensor reverse_axis(Ctx& c, const Tensor& x, int64_t axis, const char* why) {
  std::vector<int64_t> rev;
  for (int64_t i = static_dim(c, x, axis, why) - 1; i >= 0; --i) rev.push_back(i);
  return take(c, x, axis, rev);
}

Tensor pad_axis(const Tensor& x, int64_t axis, int64_t begin, int64_t end, const Tensor& fill) {
  if (begin <= 0 && end <= 0) return x;
  auto block = [&](int64_t len) {
    Shape s = x.shape();
    s[static_cast<size_t>(axis)] = Dim(len);
    return expand(fill, s);
  };
  std::vector<Tensor> parts;
  if (begin > 0) parts.push_back(block(begin));
  parts.push_back(x);
  if (end > 0) parts.push_back(block(end));
  return concat(parts, axis);
}

// A gather from the flattened x at flat positions: the index along `axis`,
// the element's own coordinate along every other.
Tensor take_along(Ctx& c, const Tensor& x, const Tensor& idx, int64_t axis) {
  std::vector<int64_t> xs = static_shape(c, x, "GatherElements of a symbolic shape");
  std::vector<int64_t> is = static_shape(c, idx, "GatherElements of a symbolic shape");
  if (is.size() != xs.size()) c.fail("data and indices differ in rank");
  Tensor i64 = cast(idx, DType::i64);
  i64 = where(i64 < 0.0, i64 + static_cast<double>(xs[static_cast<size_t>(axis)]), i64);
  std::optional<Tensor> flat;
  int64_t stride = 1;
  for (int64_t d = x.rank() - 1; d >= 0; --d) {
    Tensor coord = i64;
    if (d != axis) {
      Shape s(is.size(), Dim(1));
      s[static_cast<size_t>(d)] = Dim(is[static_cast<size_t>(d)]);
      coord = reshape(iota(x, Dim(is[static_cast<size_t>(d)])), s);
    }
    Tensor term = stride == 1 ? coord : coord * static_cast<double>(stride);
    flat = flat ? *flat + term : term;
    stride *= xs[static_cast<size_t>(d)];
  }
  Shape out(is.begin(), is.end());
  Tensor at = expand(*flat, out);
  return reshape(gather(reshape(x, {Dim(-1)}), reshape(at, {Dim(-1)}), 0), out);
}

const Converter* find_converter(const std::string& op_type) {
  static const ConverterTable table = [] {
    ConverterTable t;
    add_math_ops(t);
    add_shape_ops(t);
    add_nn_ops(t);
    add_control_ops(t);
    add_attention_ops(t);
    add_quant_ops(t);
    return t;
  }();
  auto it = table.find(op_type);
  return it == table.end() ? nullptr : &it->second;
}

}  // namespace tj::onnx_import
