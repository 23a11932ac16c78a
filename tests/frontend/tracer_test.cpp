#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "ir/text.h"
#include "ir/verifier.h"
#include "models/llama.h"
#include "tensorjit/tensor.h"

namespace tj {
namespace {

TEST(Tracer, OperatorsRecordTheGraph) {
  Tracer t("f");
  Tensor x = t.input("x", DType::f32, {2, 3});
  Tensor w = t.param("w", DType::f32, {3, 4});
  Tensor y = -(matmul(x, w) * 2.0 + 1.0) / x.dim(1).value();
  Graph g = t.finish({y});
  verify(g);
  EXPECT_EQ(print_graph(g),
            "graph f\n"
            "input %x : f32[2,3]\n"
            "param %w : f32[3,4]\n"
            "%0 = matmul(%x, %w) : f32[2,4]\n"
            "%1 = const {value=2.0} : f32[]\n"
            "%2 = mul(%0, %1) : f32[2,4]\n"
            "%3 = const {value=1.0} : f32[]\n"
            "%4 = add(%2, %3) : f32[2,4]\n"
            "%5 = neg(%4) : f32[2,4]\n"
            "%6 = const {value=3.0} : f32[]\n"
            "%7 = div(%5, %6) : f32[2,4]\n"
            "return %7\n");
}

// Ordinary C++ keeps running: the loop unrolls, the `if` specializes.
Tensor block(const Tensor& x, int repeats, bool use_tanh) {
  Tensor h = x;
  for (int i = 0; i < repeats; ++i) h = use_tanh ? tanh(h) : sigmoid(h);
  return h;
}

TEST(Tracer, ControlFlowOnCppValuesSpecializes) {
  Tracer t;
  Tensor x = t.input("x", DType::f32, {4});
  Graph g = t.finish({block(x, 3, true)});
  std::string text = print_graph(g);
  EXPECT_EQ(g.size(), 4u);
  EXPECT_EQ(text.find("sigmoid"), std::string::npos);
  EXPECT_NE(text.find("%2 = tanh(%1)"), std::string::npos) << text;
}

TEST(Tracer, ShapeErrorNamesOpAndOperands) {
  Tracer t;
  Tensor a = t.input("a", DType::f32, {2, 4, 16});
  Tensor b = t.input("b", DType::f32, {2, 8, Dim::symbol("S")});
  try {
    matmul(a, b);
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(), "matmul(f32[2,4,16], f32[2,8,S]): contracting dimensions differ: 16 vs 8");
  }
  EXPECT_EQ(t.graph().size(), 2u);  // nothing half-built was left behind
}

TEST(Tracer, SymbolicShapesFlowThrough) {
  Tracer t;
  Dim S = Dim::symbol("S");
  Tensor a = t.input("a", DType::f32, {2, 4, 16});
  Tensor b = t.input("b", DType::f32, {2, 16, S});
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.type().str(), "f32[2,4,S]");
  Tensor r = reshape(c, {-1, S});
  EXPECT_EQ(r.type().str(), "f32[8,S]");
  EXPECT_EQ(reshape(c, {2, -1}).type().str(), "f32[2,4*S]");
  EXPECT_EQ(slice(r, 1, 1, S).type().str(), "f32[8,S-1]");
  EXPECT_EQ(concat({r, r}, 1).type().str(), "f32[8,2*S]");
  EXPECT_THROW(reshape(c, {-1, -1}), ShapeError);
  EXPECT_THROW(reshape(c, {3, -1}), ShapeError);
}

TEST(Tracer, PythonStyleSlices) {
  Tracer t;
  Tensor x = t.input("x", DType::f32, {10});
  EXPECT_EQ(slice(x, 0, -3, 10).type().str(), "f32[3]");
  EXPECT_EQ(slice(x, 0, 2, 100).type().str(), "f32[8]");
  EXPECT_EQ(slice(x, -1, 0, 10, 4).type().str(), "f32[3]");
}

TEST(Tracer, MixingTracesAndDataReadsAreErrors) {
  Tracer t1, t2;
  Tensor a = t1.input("a", DType::f32, {2});
  Tensor b = t2.input("b", DType::f32, {2});
  EXPECT_THROW(a + b, Error);
  EXPECT_THROW(a.item(), Error);
  EXPECT_THROW(Tensor().type(), Error);
  EXPECT_THROW(t1.input("a", DType::f32, {3}), Error);
}

// Current resident set size in bytes (Linux).
long rss_bytes() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * 4096;
}

TEST(Tracer, Llama8BLayerIsTracedShapeOnly) {
  const auto& c = models::llama_config("llama3-8b");
  long before = rss_bytes();
  Graph g = models::trace_llama_layer(c, {1, 2048, 2048, DType::bf16});
  long grown = rss_bytes() - before;
  verify(g);
  // The layer's weights alone are 218M parameters (436 MB in bf16): tracing
  // must not touch anything near that.
  EXPECT_LT(grown, 16l << 20);
  int64_t weight_elems = 0;
  size_t const_values = 0;
  for (const Node& n : g.nodes()) {
    if (n.op == Op::param) weight_elems += *numel_const(n.type.shape);
    if (n.op == Op::constant) const_values += n.const_data()->size();
  }
  EXPECT_GT(weight_elems, 218'000'000);
  EXPECT_LE(const_values, 4u);
  EXPECT_EQ(g.type(g.outputs()[0]).str(), "bf16[1,2048,4096]");
}

TEST(Tracer, MultiLayerModelShapes) {
  const auto& c = models::llama_config("tiny");
  Graph g = models::trace_llama(c, {2, 5, 9, DType::f32}, 3);
  verify(g);
  ASSERT_EQ(g.outputs().size(), 7u);
  EXPECT_EQ(g.type(g.outputs()[0]).str(), "f32[2,5,256]");
  EXPECT_EQ(g.type(g.outputs()[1]).str(), "f32[2,2,9,16]");
  EXPECT_EQ(g.inputs().size(), 2u + 6u);
  EXPECT_EQ(g.params().size(), 3u + 3u * 9u + 2u);
  EXPECT_THROW(models::llama_config("gpt5"), Error);
}

// A constant made from a view copies it: the graph keeps the values it
// was given, whatever happens to the caller's memory later. (The Python
// binding passes views of temporary numpy arrays: two constants from
// reused memory became one value.)
TEST(Tracer, ConstantsFromViewsAreCopied) {
  Tracer t("c");
  std::vector<float> buf = {-5.f, 1.f};
  Tensor a = t.constant(NDArray::view(DType::f32, {2}, buf.data()));
  buf = {3.f, 4.f};
  Tensor b = t.constant(NDArray::view(DType::f32, {2}, buf.data()));
  TracedGraph g = t.finish({a, b});
  std::string text = g.text();
  EXPECT_NE(text.find("-5"), std::string::npos) << text;
  EXPECT_NE(text.find("3"), std::string::npos) << text;
}

}  // namespace
}  // namespace tj
