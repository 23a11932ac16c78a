// ONNX converters: QuantizeLinear and DequantizeLinear (the QDQ format of
// quantized models), per tensor, per axis or per block, to and from the
// 8-bit, 16-bit, 4-bit and float8 types, and DynamicQuantizeLinear (of
// dynamically quantized models), written as casts and arithmetic.
#include "frontend/onnx/context.h"

namespace tj::onnx_import {

namespace {

// A scale or zero point shaped to broadcast against x: a scalar (or one
// element) as it is; per axis, a vector of x's size along `axis`; per block
// (block > 0), x's rank with ceil(size / block) along `axis`, each element
// repeated over its block.
Tensor along(Ctx& c, const Tensor& p, const Tensor& x, int64_t axis_attr, int64_t block) {
  if (block <= 0 && (p.rank() == 0 || (p.rank() == 1 && p.shape()[0] == Dim(1)))) return p;  // per tensor: axis unused
  const int64_t axis = axis_of(c, axis_attr, x.rank());
  if (block <= 0) {
    if (p.rank() != 1 || p.shape()[0] != x.shape()[static_cast<size_t>(axis)])
      c.fail("a per-axis scale or zero point of " + shape_str(p.shape()) + " for " + shape_str(x.shape()) + " along axis " + std::to_string(axis));
    Shape s(static_cast<size_t>(x.rank()), Dim(1));
    s[static_cast<size_t>(axis)] = p.shape()[0];
    return reshape(p, s);
  }
  if (p.rank() != x.rank()) c.fail("a blocked scale or zero point must have the input's rank");
  const int64_t n = static_dim(c, x, axis, "a blocked quantization axis of symbolic size");
  if (static_dim(c, p, axis, "a blocked scale of symbolic size") != (n + block - 1) / block)
    c.fail("a blocked scale of " + shape_str(p.shape()) + " for " + shape_str(x.shape()) + " in blocks of " + std::to_string(block));
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < n; ++i) idx.push_back(i / block);
  return take(c, p, axis, idx);
}

struct Layout {
  int64_t axis, block;  // the attribute's axis: normalized where it is used
};

Layout layout(Ctx& c) {
  const int64_t block = c.attr_int("block_size", 0);
  if (block < 0) c.fail("block_size " + std::to_string(block) + " is negative");
  return {c.attr_int("axis", 1), block};
}

// y = (x - zero_point) * scale, in float, as the scale's type (or
// output_dtype). float8 inputs have no zero point to subtract.
R dequantize_linear(Ctx& c) {
  Tensor x = c.in(0), scale = c.in(1);
  if (!is_float(scale.dtype())) c.fail("the scale must be a float");
  Layout l = layout(c);
  DType out = scale.dtype();
  if (int64_t o = c.attr_int("output_dtype", 0); o != 0) out = dtype_of_onnx(static_cast<int32_t>(o), "DequantizeLinear output_dtype");
  Tensor xf = cast(x, DType::f32);
  if (c.has_input(2)) {
    if (c.in(2).dtype() != x.dtype()) c.fail("the zero point's type differs from the input's");
    if (!is_minifloat(x.dtype())) xf = xf - cast(along(c, c.in(2), x, l.axis, l.block), DType::f32);
  }
  return {v(cast(xf * cast(along(c, scale, x, l.axis, l.block), DType::f32), out))};
}

// y = saturate(round(x / scale) + zero_point), rounding halves to even, in
// the zero point's type (or output_dtype, else uint8); to float8, x / scale
// cast with the node's saturate.
R quantize_linear(Ctx& c) {
  Tensor x = c.in(0), scale = c.in(1);
  if (!is_float(x.dtype()) || !is_float(scale.dtype())) c.fail("the input and scale must be floats");
  if (c.attr_int("precision", 0) != 0) c.unsupported("QuantizeLinear's precision attribute is not supported");
  Layout l = layout(c);
  DType out = DType::u8;
  if (int64_t o = c.attr_int("output_dtype", 0); o != 0) out = dtype_of_onnx(static_cast<int32_t>(o), "QuantizeLinear output_dtype");
  if (c.has_input(2)) {
    if (c.attr_int("output_dtype", 0) != 0 && c.in(2).dtype() != out) c.fail("output_dtype differs from the zero point's type");
    out = c.in(2).dtype();
  }
  Tensor q = cast(x, DType::f32) / cast(along(c, scale, x, l.axis, l.block), DType::f32);
  if (is_minifloat(out)) return {v(cast(q, out, c.attr_int("saturate", 1) != 0))};
  if (!is_int(out) || out == DType::u64 || out == DType::i64) c.unsupported("QuantizeLinear to " + std::string(dtype_name(out)));
  q = round(q);
  if (c.has_input(2)) q = q + cast(along(c, c.in(2), x, l.axis, l.block), DType::f32);
  return {v(cast(clip(q, int_min(out), int_max(out)), out))};
}

// uint8 over the range of x and 0: scale = (max(x, 0) - min(x, 0)) / 255,
// zero point = round(-min / scale) saturated, y quantized with them.
R dynamic_quantize_linear(Ctx& c) {
  Tensor x = c.in(0);
  if (x.dtype() != DType::f32) c.fail("DynamicQuantizeLinear takes float32");
  std::vector<int64_t> all;
  for (int64_t i = 0; i < x.rank(); ++i) all.push_back(i);
  Tensor zero = c.scalar(0, DType::f32);
  Tensor hi = maximum(amax(x, all, false), zero), lo = minimum(neg(amax(neg(x), all, false)), zero);
  Tensor scale = (hi - lo) / 255.0;
  Tensor zp = clip(round(neg(lo) / scale), 0.0, 255.0);
  Tensor y = clip(round(x / scale) + zp, 0.0, 255.0);
  return {v(cast(y, DType::u8)), v(scale), v(cast(zp, DType::u8))};
}

}  // namespace

void add_quant_ops(ConverterTable& t) {
  t.insert({{"QuantizeLinear", quantize_linear}, {"DequantizeLinear", dequantize_linear}, {"DynamicQuantizeLinear", dynamic_quantize_linear}});
}

}  // namespace tj::onnx_import
