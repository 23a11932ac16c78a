// The public ahead-of-time API (tensorjit/compile.h), used as a user would:
// only public headers. Also writes the weights and the expected result that
// examples/mlp reads (TJ_TEST_OUT/mlp.safetensors), so CI checks that a
// project built against the installed package computes the same thing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>


#include "support/scratch.h"
#include "tensorjit/compile.h"
#include "tensorjit/error.h"
#include "tensorjit/safetensors.h"
#include "tensorjit/tensor.h"

namespace {

using tj::DType;
using tj::NDArray;
using tj::Tensor;

class Aot : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tj::testing::use_scratch_cache("aot");
  }
};

NDArray randn(std::vector<int64_t> shape, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, scale);
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = n(rng);
  return NDArray::of<float>(std::move(shape), v);
}

// The MLP examples/mlp.cpp runs: relu(x @ w1 + b1) @ w2 + b2.
std::vector<Tensor> mlp(tj::Tracer& t) {
  Tensor x = t.input("x", DType::f32, {tj::Dim::symbol("T"), 32});
  Tensor h = tj::relu(tj::matmul(x, t.param("w1", DType::f32, {32, 64})) + t.param("b1", DType::f32, {64}));
  return {tj::matmul(h, t.param("w2", DType::f32, {64, 16})) + t.param("b2", DType::f32, {16})};
}

// The same, by hand, in double.
std::vector<double> mlp_by_hand(const tj::Bindings& w, const NDArray& x) {
  int64_t T = x.shape()[0];
  std::vector<double> out(static_cast<size_t>(T * 16));
  for (int64_t r = 0; r < T; ++r) {
    std::vector<double> h(64);
    for (int64_t j = 0; j < 64; ++j) {
      double s = w.at("b1").data<float>()[j];
      for (int64_t k = 0; k < 32; ++k) s += double(x.data<float>()[r * 32 + k]) * w.at("w1").data<float>()[k * 64 + j];
      h[static_cast<size_t>(j)] = std::max(s, 0.0);
    }
    for (int64_t j = 0; j < 16; ++j) {
      double s = w.at("b2").data<float>()[j];
      for (int64_t k = 0; k < 64; ++k) s += h[static_cast<size_t>(k)] * w.at("w2").data<float>()[k * 16 + j];
      out[static_cast<size_t>(r * 16 + j)] = s;
    }
  }
  return out;
}

TEST_F(Aot, MlpFromSafetensorsMatchesByHand) {
  tj::Bindings weights{{"w1", randn({32, 64}, 1, 0.2f)}, {"b1", randn({64}, 2)}, {"w2", randn({64, 16}, 3, 0.2f)}, {"b2", randn({16}, 4)}};
  NDArray x = randn({5, 32}, 5);
  std::vector<double> want = mlp_by_hand(weights, x);
  // What examples/mlp reads: the weights, an input and the expected output.
  std::filesystem::create_directories(TJ_TEST_OUT);
  std::string path = std::string(TJ_TEST_OUT) + "/mlp.safetensors";
  tj::Bindings file = weights;
  file.emplace("x", x);
  std::vector<float> wantf(want.begin(), want.end());
  file.emplace("expected", NDArray::of<float>({5, 16}, wantf));
  tj::write_safetensors(path, file, {{"model", "relu(x @ w1 + b1) @ w2 + b2"}});

  tj::SafetensorsFile f(path);
  tj::Program p = tj::Program::compile("mlp", mlp, f);
  EXPECT_TRUE(p.compiled());
  ASSERT_EQ(p.inputs().size(), 1u);
  EXPECT_EQ(p.inputs()[0].name, "x");
  EXPECT_EQ(p.inputs()[0].type.str(), "f32[T,32]");
  ASSERT_EQ(p.outputs().size(), 1u);
  EXPECT_EQ(p.outputs()[0].name, "out0");
  EXPECT_EQ(p.aliases(), std::vector<int>{-1});
  tj::Bindings in{{"x", x}};
  tj::Bindings out = p.run_named(in);
  const NDArray& y = out.at("out0");
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{5, 16}));
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_NEAR(y.data<float>()[i], want[static_cast<size_t>(i)], 1e-4) << i;
  // One compilation serves every T.
  NDArray x2 = randn({2, 32}, 6);
  tj::Bindings in2{{"x", x2}};
  EXPECT_EQ(p.run(in2)[0].shape(), (std::vector<int64_t>{2, 16}));
}

TEST_F(Aot, WrongOrMissingWeightsAreClearErrors) {
  std::string path = tj::testing::scratch_dir("aot") + "/bad.safetensors";
  tj::write_safetensors(path, {{"w1", randn({32, 64}, 1)}, {"b1", NDArray(DType::f64, {64})}});
  tj::SafetensorsFile f(path);
  try {
    tj::Program::compile("mlp", mlp, f);
    ADD_FAILURE() << "expected an error";
  } catch (const tj::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'b1' is f64[64], the graph's param is f32[64]"), std::string::npos) << m;
  }
  tj::write_safetensors(path, {{"w1", randn({32, 64}, 1)}});
  tj::SafetensorsFile g(path);
  EXPECT_THROW(tj::Program::compile("mlp", mlp, g), tj::Error);
}

// A traced graph prints as text and reads back; typed arrays and views go in
// without copies through doubles; a donated cache is written through a view
// into the caller's memory, and aliases() names it.
TEST_F(Aot, TextRoundTripViewsAndDonatedCaches) {
  tj::Tracer t("cache");
  Tensor cache = t.input("cache", DType::f32, {1, 1, 4, 2});
  Tensor rows = t.input("rows", DType::f32, {1, 1, 1, 2});
  Tensor pos = t.input("pos", DType::i64, {});
  tj::TracedGraph g = t.finish({tj::kv_write(cache, rows, pos), tj::sum(tj::exp(rows), {3})});
  tj::TracedGraph back = tj::TracedGraph::parse(g.text());
  EXPECT_EQ(back.text(), g.text());
  EXPECT_EQ(back.inputs().size(), 3u);
  tj::Program p = tj::Program::compile(back, {});
  EXPECT_EQ(p.aliases(), (std::vector<int>{0, -1}));
  std::vector<float> mine(8, 0.0f);
  std::vector<int64_t> at{2};
  tj::Bindings in{{"cache", NDArray::view(DType::f32, {1, 1, 4, 2}, mine.data())},
                  {"rows", NDArray::of<float>({1, 1, 1, 2}, std::vector<float>{1.5f, -2.0f})},
                  {"pos", NDArray::view(DType::i64, {}, at.data())}};
  EXPECT_TRUE(in.at("cache").is_view());
  auto out = p.run(in);
  EXPECT_EQ(mine[4], 1.5f);  // written in place, in the caller's memory
  EXPECT_EQ(mine[5], -2.0f);
  EXPECT_EQ(out[0].data<float>()[4], 1.5f);
  EXPECT_NEAR(out[1].data<float>()[0], std::exp(1.5) + std::exp(-2.0), 1e-5);
  NDArray copy = in.at("cache");
  EXPECT_TRUE(copy.is_view());
  EXPECT_EQ(copy.raw(), mine.data());
  NDArray owned = NDArray::copy_of(DType::f32, {1, 1, 4, 2}, mine.data(), mine.size() * sizeof(float));
  EXPECT_FALSE(owned.is_view());
  EXPECT_THROW(NDArray::of<float>({3}, std::vector<float>{1, 2}), tj::Error);
}

}  // namespace
