// The composite layers' gradient builders (tensorjit/nn.h) against reverse
// mode on the IR (autodiff's vjp of the forward builder), in f64 on the
// interpreter: conv's input (conv_transpose) and weight gradients,
// avg_pool_grad, adaptive_avg_pool_grad and attention_grad, over strides,
// dilations, groups, pads, ceil_mode and masks. The forward builders are
// checked against the ONNX node suite (scripts/onnx-conformance) and
// PyTorch's OpInfo samples (scripts/torch-conformance).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "autodiff/vjp.h"
#include "reference/interpreter.h"
#include "reference/random_inputs.h"
#include "tensorjit/nn.h"

namespace tj {
namespace {

using Inputs = std::vector<std::pair<std::string, Shape>>;
using Forward = std::function<Tensor(const std::vector<Tensor>&)>;
// The claimed gradients of every input, given the inputs and the output's cotangent.
using Backward = std::function<std::vector<Tensor>(const std::vector<Tensor>&, const Tensor&)>;

// The most any gradient differs from vjp's (relative to its largest magnitude).
double worst(const Inputs& inputs, const Forward& fwd, const Backward& bwd, uint64_t seed = 3) {
  Tracer t("fwd");
  std::vector<Tensor> xs;
  for (const auto& [name, shape] : inputs) xs.push_back(t.input(name, DType::f64, shape));
  Tensor y = fwd(xs);
  Graph g = t.finish({y}).graph();
  VjpSpec spec;
  for (const auto& [name, shape] : inputs) spec.wrt.push_back(name);
  Vjp r = vjp(g, spec);
  EXPECT_EQ(r.cotangents.size(), 1u);
  RandomInputOptions ro;
  ro.seed = seed;
  Bindings in = random_inputs(r.joint, ro);
  InterpretOptions f64;
  f64.compute = DType::f64;
  std::vector<NDArray> want = interpret(r.joint, in, f64);

  Tracer b("bwd");
  std::vector<Tensor> bx;
  for (const auto& [name, shape] : inputs) bx.push_back(b.input(name, DType::f64, shape));
  Tensor ct = b.input(r.cotangents[0], DType::f64, g.type(g.outputs()[0]).shape);
  Graph bg = b.finish(bwd(bx, ct)).graph();
  std::vector<NDArray> got = interpret(bg, in, f64);
  EXPECT_EQ(got.size(), inputs.size());
  EXPECT_EQ(want.size(), r.forward_outputs + inputs.size());
  if (got.size() != inputs.size() || want.size() != r.forward_outputs + inputs.size()) return 1e9;
  double w = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const NDArray &a = got[i], &e = want[r.forward_outputs + i];
    EXPECT_EQ(a.shape(), e.shape()) << inputs[i].first;
    if (a.shape() != e.shape()) return 1e9;
    double scale = 1e-300, diff = 0;
    for (int64_t k = 0; k < e.numel(); ++k) scale = std::max(scale, std::abs(e.get(k))), diff = std::max(diff, std::abs(a.get(k) - e.get(k)));
    w = std::max(w, diff / scale);
  }
  return w;
}

TEST(NnBuilders, ConvGradientsAreItsDerivative) {
  struct Case {
    Shape x, w;
    ConvOptions o;
  };
  std::vector<Case> cases = {
      {{2, 4, 9, 9}, {6, 4, 3, 3}, {}},
      {{2, 4, 9, 8}, {8, 2, 3, 2}, {{2, 1}, {2, 1}, {2, 0}, {1, 2}, 2}},  // stride, dilation, uneven pads, groups
      {{1, 3, 10}, {4, 3, 4}, {{3}, {1}, {1}, {1}, 1}},                    // 1-D, a stride that skips the end
      {{1, 2, 5, 4, 4}, {2, 1, 2, 2, 2}, {{1}, {1}, {1}, {0}, 2}},         // 3-D, depthwise
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w));
    std::vector<int64_t> kernel;
    for (size_t i = 2; i < c.w.size(); ++i) kernel.push_back(*c.w[i].as_const());
    auto fwd = [&](const std::vector<Tensor>& in) { return conv(in[0], in[1], Tensor(), c.o); };
    auto bwd = [&](const std::vector<Tensor>& in, const Tensor& ct) {
      // The input's gradient: the transposed convolution, with the output
      // padding that gives back the input's size.
      ConvTransposeOptions t;
      static_cast<ConvOptions&>(t) = c.o;
      size_t k = kernel.size();
      auto at = [](const std::vector<int64_t>& v, size_t i, int64_t def) { return v.empty() ? def : v.size() == 1 ? v[0] : v[i]; };
      for (size_t i = 0; i < k; ++i) {
        int64_t s = at(c.o.stride, i, 1), d = at(c.o.dilation, i, 1), pb = at(c.o.pad_begin, i, 0), pe = at(c.o.pad_end, i, 0);
        int64_t in_n = *in[0].shape()[i + 2].as_const(), out_n = *ct.shape()[i + 2].as_const();
        t.output_padding.push_back(in_n - ((out_n - 1) * s - pb - pe + d * (kernel[i] - 1) + 1));
      }
      return std::vector<Tensor>{conv_transpose(ct, in[1], Tensor(), t), conv_weight_grad(in[0], ct, kernel, c.o)};
    };
    EXPECT_LE(worst({{"x", c.x}, {"w", c.w}}, fwd, bwd), 1e-12);
  }
}

TEST(NnBuilders, AvgPoolGradientsAreItsDerivative) {
  for (bool ceil : {false, true})
    for (bool include : {false, true})
      for (int64_t divisor : {0, 5}) {
        PoolOptions o;
        o.kernel = {3, 2}, o.stride = {2, 2}, o.pad_begin = {1, 0}, o.pad_end = {1, 1}, o.ceil_mode = ceil;
        SCOPED_TRACE(std::string(ceil ? "ceil " : "") + (include ? "count_include_pad " : "") + std::to_string(divisor));
        auto fwd = [&](const std::vector<Tensor>& in) { return avg_pool(in[0], o, include, divisor); };
        auto bwd = [&](const std::vector<Tensor>& in, const Tensor& ct) { return std::vector<Tensor>{avg_pool_grad(ct, in[0], o, include, divisor)}; };
        EXPECT_LE(worst({{"x", {2, 3, 8, 9}}}, fwd, bwd), 1e-12);
      }
  for (std::vector<int64_t> out : {std::vector<int64_t>{1, 1}, {3, 4}, {5, 2}}) {
    auto fwd = [&](const std::vector<Tensor>& in) { return adaptive_avg_pool(in[0], out); };
    auto bwd = [&](const std::vector<Tensor>& in, const Tensor& ct) { return std::vector<Tensor>{adaptive_avg_pool_grad(ct, in[0], out)}; };
    EXPECT_LE(worst({{"x", {2, 3, 7, 8}}}, fwd, bwd), 1e-12);
  }
}

TEST(NnBuilders, AttentionGradientsAreItsDerivative) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    // Grouped: 4 query heads on 2 KV heads; causal with an offset; a bias of rank 2.
    auto opts = [variant](const Tensor& q) {
      AttentionOptions o;
      if (variant == 1) o.causal = true, o.causal_offset = 2;
      if (variant == 2) {
        std::vector<double> b(35);
        for (size_t i = 0; i < b.size(); ++i) b[i] = 0.1 * static_cast<double>(i % 7) - (i % 5 == 0 ? 1e9 : 0);
        o.bias = q.tracer()->constant(NDArray::of<double>({5, 7}, b));
      }
      return o;
    };
    auto fwd = [&](const std::vector<Tensor>& in) { return attention(in[0], in[1], in[2], opts(in[0])); };
    auto bwd = [&](const std::vector<Tensor>& in, const Tensor& ct) {
      AttentionOptions o = opts(in[0]);
      Tensor out = attention(in[0], in[1], in[2], o), lse = attention_lse(in[0], in[1], o);
      AttentionGrads g = attention_grad(in[0], in[1], in[2], out, ct, lse, o);
      return std::vector<Tensor>{g.dq, g.dk, g.dv};
    };
    EXPECT_LE(worst({{"q", {1, 4, 5, 8}}, {"k", {1, 2, 7, 8}}, {"v", {1, 2, 7, 6}}}, fwd, bwd), 1e-12);
  }
}

// Bad geometry is a clear error naming the builder, never a crash.
TEST(NnBuilders, BadGeometryIsAClearError) {
  Tracer t("bad");
  Tensor x = t.input("x", DType::f32, {1, 4, 5, 5});
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { conv(x, t.input("w", DType::f32, {6, 3, 3, 3}), Tensor()); }).find("conv: input channels 4"), std::string::npos);
  EXPECT_NE(message([&] { conv(x, t.input("w2", DType::f32, {6, 4, 7, 7}), Tensor()); }).find("larger than the padded input"), std::string::npos);
  PoolOptions p;
  p.kernel = {2, 0};
  EXPECT_NE(message([&] { max_pool(x, p); }).find("max_pool: kernel sizes must be positive"), std::string::npos);
  EXPECT_NE(message([&] { pad(t.input("one", DType::f32, {3, 1}), {0, 2}, {0, 0}, PadMode::reflect); }).find("pad: reflect padding of a dim of 1"),
            std::string::npos);
  EXPECT_NE(message([&] { sort(t.input("big", DType::f32, {2000000})); }).find("sort: sorting 2000000 elements"), std::string::npos);
  EXPECT_NE(message([&] { topk(x, 9, -1); }).find("topk: k = 9"), std::string::npos);
}

}  // namespace
}  // namespace tj
