// ONNX node converters, one per op type, as the ONNX spec defines each at
// opset 13 and later (attributes, defaults, optional operands). Each returns
// the node's results in the order of its outputs.
#include <cmath>
#include <map>

#include "frontend/onnx/context.h"
#include "tensorjit/nn.h"

namespace tj::onnx_import {

namespace {

using R = std::vector<Value>;
Value v(Tensor t) { return {std::move(t), std::nullopt}; }

template <Tensor (*F)(const Tensor&)>
R unary(Ctx& c) {
  return {v(F(c.in(0)))};
}
template <Tensor (*F)(const Tensor&, const Tensor&)>
R binary(Ctx& c) {
  return {v(F(c.in(0), c.in(1)))};
}

Tensor add(const Tensor& a, const Tensor& b) { return a + b; }
Tensor sub(const Tensor& a, const Tensor& b) { return a - b; }
Tensor mul(const Tensor& a, const Tensor& b) { return a * b; }
Tensor div(const Tensor& a, const Tensor& b) { return a / b; }

// Max, Min, Sum, Mean: variadic, broadcasting.
template <Tensor (*F)(const Tensor&, const Tensor&)>
R fold(Ctx& c) {
  Tensor r = c.in(0);
  for (int i = 1; i < c.node->input_size(); ++i) r = F(r, c.in(static_cast<size_t>(i)));
  return {v(r)};
}

int64_t axis_of(Ctx& c, int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) c.fail("axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

R constant(Ctx& c) {
  const auto* a = c.attr("value");
  NDArray value;
  if (a && a->has_t()) value = tensor_value(a->t(), "Constant");
  else if (const auto* f = c.attr("value_float")) value = NDArray::of<float>({}, std::vector<float>{f->f()});
  else if (const auto* i = c.attr("value_int")) value = NDArray::of<int64_t>({}, std::vector<int64_t>{i->i()});
  else if (const auto* fs = c.attr("value_floats")) value = NDArray::of<float>({fs->floats_size()}, std::vector<float>(fs->floats().begin(), fs->floats().end()));
  else if (const auto* is = c.attr("value_ints")) value = NDArray::of<int64_t>({is->ints_size()}, std::vector<int64_t>(is->ints().begin(), is->ints().end()));
  else c.fail("a Constant needs value, value_float(s) or value_int(s)");
  std::vector<double> data = value.to_vector();
  Tensor t = c.tracer.constant(value.dtype(), Shape(value.shape().begin(), value.shape().end()), data);
  return {{t, value}};
}

R shape(Ctx& c) {
  const Shape& s = c.in(0).shape();
  std::vector<int64_t> dims;
  for (const Dim& d : s) {
    auto k = d.as_const();
    if (!k) c.fail("Shape of a symbolic dim (" + d.str() + ") is not supported yet");
    dims.push_back(*k);
  }
  int64_t r = static_cast<int64_t>(dims.size());
  int64_t start = c.attr_int("start", 0), end = c.attr_int("end", r);
  start = std::clamp<int64_t>(start < 0 ? start + r : start, 0, r);
  end = std::clamp<int64_t>(end < 0 ? end + r : end, 0, r);
  std::vector<int64_t> part(dims.begin() + start, dims.begin() + std::max(start, end));
  NDArray a = NDArray::of<int64_t>({static_cast<int64_t>(part.size())}, part);
  std::vector<double> d(part.begin(), part.end());
  return {{c.tracer.constant(DType::i64, {static_cast<int64_t>(part.size())}, d), a}};
}

R identity(Ctx& c) { return {c.input(0)}; }

R cast(Ctx& c) {
  DType to = dtype_of_onnx(static_cast<int32_t>(c.attr_int("to", 0)), "Cast");
  return {v(tj::cast(c.in(0), to))};
}

R matmul_(Ctx& c) {
  Tensor a = c.in(0), b = c.in(1);
  // 1-D operands as numpy: promoted to a matrix, the added dim dropped after.
  bool va = a.rank() == 1, vb = b.rank() == 1;
  if (va) a = unsqueeze(a, {0});
  if (vb) b = unsqueeze(b, {1});
  Tensor r = matmul(a, b);
  if (va) r = squeeze(r, {r.rank() - 2});
  if (vb) r = squeeze(r, {r.rank() - 1});
  return {v(r)};
}

// Y = alpha * A' @ B' + beta * C.
R gemm(Ctx& c) {
  Tensor a = c.in(0), b = c.in(1);
  if (c.attr_int("transA", 0)) a = transpose(a);
  if (c.attr_int("transB", 0)) b = transpose(b);
  Tensor y = matmul(a, b);
  if (double alpha = c.attr_float("alpha", 1.0); alpha != 1.0) y = y * alpha;
  if (c.has_input(2)) {
    Tensor bias = c.in(2);
    if (double beta = c.attr_float("beta", 1.0); beta != 1.0) bias = bias * beta;
    y = y + bias;
  }
  return {v(y)};
}

R transpose_(Ctx& c) {
  Tensor x = c.in(0);
  std::vector<int64_t> rev;
  for (int64_t i = x.rank() - 1; i >= 0; --i) rev.push_back(i);
  return {v(permute(x, c.attr_ints("perm", rev)))};
}

// 0 copies the input's dim (unless allowzero), -1 is inferred.
R reshape_(Ctx& c) {
  Tensor x = c.in(0);
  std::vector<int64_t> to = c.known_ints(1, "the shape");
  bool allowzero = c.attr_int("allowzero", 0) != 0;
  Shape s;
  for (size_t i = 0; i < to.size(); ++i) {
    if (to[i] == 0 && !allowzero) {
      if (static_cast<int>(i) >= x.rank()) c.fail("shape entry " + std::to_string(i) + " is 0 but the input has rank " + std::to_string(x.rank()));
      s.push_back(x.shape()[i]);
    } else {
      s.push_back(Dim(to[i]));
    }
  }
  return {v(reshape(x, s))};
}

R flatten(Ctx& c) {
  Tensor x = c.in(0);
  int64_t axis = c.attr_int("axis", 1);
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis > x.rank()) c.fail("axis out of range");
  Dim outer(1), inner(1);
  for (int64_t i = 0; i < x.rank(); ++i) (i < axis ? outer : inner) = (i < axis ? outer : inner) * x.shape()[static_cast<size_t>(i)];
  return {v(reshape(x, {outer, inner}))};
}

// Axes: an operand from opset 13 (Unsqueeze, Squeeze, ReduceSum) or 18
// (ReduceMean, ReduceMax), an attribute before.
std::vector<int64_t> axes_of(Ctx& c, bool operand) {
  if (operand) return c.has_input(1) ? c.known_ints(1, "the axes") : std::vector<int64_t>{};
  return c.attr_ints("axes", {});
}

R unsqueeze_(Ctx& c) {
  std::vector<int64_t> axes = axes_of(c, true);
  if (axes.empty()) c.fail("Unsqueeze needs axes");
  return {v(unsqueeze(c.in(0), axes))};
}

R squeeze_(Ctx& c) {
  Tensor x = c.in(0);
  std::vector<int64_t> axes = axes_of(c, true);
  if (axes.empty())
    for (int64_t i = 0; i < x.rank(); ++i)
      if (x.shape()[static_cast<size_t>(i)] == Dim(1)) axes.push_back(i);
  return {v(squeeze(x, axes))};
}

template <Tensor (*F)(const Tensor&, std::vector<int64_t>, bool), bool AxesOperandAt13>
R reduce(Ctx& c) {
  Tensor x = c.in(0);
  std::vector<int64_t> axes = axes_of(c, AxesOperandAt13 || c.opset >= 18);
  bool keep = c.attr_int("keepdims", 1) != 0;
  if (axes.empty()) {
    if (c.attr_int("noop_with_empty_axes", 0)) return {v(x)};
    for (int64_t i = 0; i < x.rank(); ++i) axes.push_back(i);
  }
  return {v(F(x, axes, keep))};
}

R argmax_(Ctx& c) {
  if (c.attr_int("select_last_index", 0)) c.fail("select_last_index=1 is not supported");
  return {v(argmax(c.in(0), c.attr_int("axis", 0), c.attr_int("keepdims", 1) != 0))};
}

R softmax_(Ctx& c) { return {v(softmax(c.in(0), c.attr_int("axis", -1)))}; }

R concat_(Ctx& c) {
  std::vector<Tensor> xs;
  for (int i = 0; i < c.node->input_size(); ++i) xs.push_back(c.in(static_cast<size_t>(i)));
  return {v(concat(xs, c.attr_int("axis", 0)))};
}

R gather_(Ctx& c) { return {v(gather(c.in(0), c.in(1), c.attr_int("axis", 0)))}; }

R where_(Ctx& c) { return {v(where(c.in(0), c.in(1), c.in(2)))}; }

// min and max are optional operands (absent: unbounded).
R clip_(Ctx& c) {
  Tensor x = c.in(0);
  Tensor lo = c.has_input(1) ? c.in(1) : c.scalar(-INFINITY, x.dtype());
  Tensor hi = c.has_input(2) ? c.in(2) : c.scalar(INFINITY, x.dtype());
  if (is_int(x.dtype())) {
    if (!c.has_input(1)) lo = c.scalar(x.dtype() == DType::i32 ? -2147483648.0 : -9223372036854775808.0, x.dtype());
    if (!c.has_input(2)) hi = c.scalar(x.dtype() == DType::i32 ? 2147483647.0 : 9223372036854775807.0, x.dtype());
  }
  return {v(clip(x, lo, hi))};
}

// approximate="tanh" or "none" (the default: the erf form).
R gelu_(Ctx& c) {
  const auto* a = c.attr("approximate");
  return {v(gelu(c.in(0), a && a->s() == "tanh"))};
}

R mod_(Ctx& c) { return {v(mod(c.in(0), c.in(1), c.attr_int("fmod", 0) != 0))}; }
R leaky_relu_(Ctx& c) { return {v(leaky_relu(c.in(0), c.attr_float("alpha", 0.01)))}; }

R layer_norm_(Ctx& c) {
  Tensor x = c.in(0);
  if (axis_of(c, c.attr_int("axis", -1), x.rank()) != x.rank() - 1) c.fail("LayerNormalization over other than the last axis is not supported yet");
  if (c.node->output_size() > 1 && !c.node->output(1).empty()) c.fail("LayerNormalization's Mean and InvStdDev outputs are not supported");
  Tensor b = c.has_input(2) ? c.in(2) : c.tracer.constant(x.dtype(), {x.shape().back()}, {0.0});
  return {v(layer_norm(x, c.in(1), b, c.attr_float("epsilon", 1e-5)))};
}

const std::map<std::string, Converter>& table() {
  static const std::map<std::string, Converter> t = {
      {"Abs", unary<abs>}, {"Neg", unary<neg>}, {"Exp", unary<exp>}, {"Log", unary<log>}, {"Sqrt", unary<sqrt>},
      {"Reciprocal", unary<recip>}, {"Tanh", unary<tanh>}, {"Sigmoid", unary<sigmoid>}, {"Sin", unary<sin>}, {"Cos", unary<cos>},
      {"Erf", unary<erf>}, {"Floor", unary<floor>}, {"Ceil", unary<ceil>}, {"Round", unary<round>}, {"Sign", unary<sign>},
      {"Relu", unary<relu>}, {"Softplus", unary<softplus>}, {"HardSwish", unary<hardswish>}, {"Not", unary<logical_not>},
      {"Gelu", gelu_},
      {"Add", binary<add>}, {"Sub", binary<sub>}, {"Mul", binary<mul>}, {"Div", binary<div>}, {"Pow", binary<pow>},
      {"Equal", binary<eq>}, {"Less", binary<lt>}, {"LessOrEqual", binary<le>}, {"Greater", binary<gt>},
      {"GreaterOrEqual", binary<ge>}, {"And", binary<logical_and>}, {"Or", binary<logical_or>},
      {"Max", fold<maximum>}, {"Min", fold<minimum>}, {"Sum", fold<add>},
      {"Constant", constant}, {"Shape", shape}, {"Identity", identity}, {"Cast", cast},
      {"MatMul", matmul_}, {"Gemm", gemm}, {"Transpose", transpose_}, {"Reshape", reshape_}, {"Flatten", flatten},
      {"Unsqueeze", unsqueeze_}, {"Squeeze", squeeze_},
      {"ReduceSum", reduce<sum, true>}, {"ReduceMean", reduce<mean, false>}, {"ReduceMax", reduce<amax, false>},
      {"ArgMax", argmax_}, {"Softmax", softmax_}, {"Concat", concat_}, {"Gather", gather_}, {"Where", where_},
      {"Clip", clip_}, {"Mod", mod_}, {"LeakyRelu", leaky_relu_}, {"LayerNormalization", layer_norm_},
  };
  return t;
}

}  // namespace

const Converter* find_converter(const std::string& op_type) {
  auto it = table().find(op_type);
  return it == table().end() ? nullptr : &it->second;
}

}  // namespace tj::onnx_import
