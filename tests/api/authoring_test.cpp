// Model authoring with the public headers: Python-style indexing, scalar
// overloads and comparison operators, linear and normalize, weights by
// prefix (ParamTree), tj::jit with named arguments and one-result functions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>


#include "support/scratch.h"
#include "tensorjit/compile.h"
#include "tensorjit/error.h"
#include "tensorjit/jit.h"
#include "tensorjit/nn.h"
#include "tensorjit/safetensors.h"
#include "tensorjit/tensor.h"

namespace {

using tj::DType;
using tj::NDArray;
using tj::Tensor;

class Authoring : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tj::testing::use_scratch_cache("authoring");
  }
};

// x[i, j, k] = 100i + 10j + k over [2, 3, 4].
NDArray numbered() {
  std::vector<float> v;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) v.push_back(float(100 * i + 10 * j + k));
  return NDArray::of<float>({2, 3, 4}, v);
}

std::vector<float> values(const NDArray& a) { return std::vector<float>(a.data<float>(), a.data<float>() + a.numel()); }

TEST_F(Authoring, IndexIsPythonSlicing) {
  tj::Program p = tj::Program::compile("index", [](tj::Tracer& t) {
    Tensor x = t.input("x", DType::f32, {2, 3, 4});
    // x[1, :, 1:3], x[:, -1], x[0, 1:, ::2], x[..] with tj::from
    return std::vector<Tensor>{x.index({1, tj::all, tj::range(1, 3)}), x.index({tj::all, -1}), x.index({0, tj::from(1), tj::range(0, 4, 2)}),
                               x.index({tj::from(1)})};
  }, tj::Bindings{});
  tj::Bindings in{{"x", numbered()}};
  auto out = p.run(in);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(values(out[0]), (std::vector<float>{101, 102, 111, 112, 121, 122}));
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(values(out[1]), (std::vector<float>{20, 21, 22, 23, 120, 121, 122, 123}));
  EXPECT_EQ(values(out[2]), (std::vector<float>{10, 12, 20, 22}));
  EXPECT_EQ(out[3].shape(), (std::vector<int64_t>{1, 3, 4}));
  tj::Tracer t;
  Tensor x = t.input("x", DType::f32, {2, 3});
  EXPECT_THROW(x.index({2}), tj::ShapeError);
  EXPECT_THROW(x.index({0, 0, 0}), tj::ShapeError);
}

TEST_F(Authoring, ScalarOverloadsOperatorsLinearNormalize) {
  tj::Bindings w{{"w", NDArray::of<float>({2, 2}, std::vector<float>{1, 2, 3, 4})}, {"b", NDArray::of<float>({2}, std::vector<float>{0.5f, -0.5f})}};
  tj::Program p = tj::Program::compile("ops", [&](tj::Tracer& t) {
    Tensor x = t.input("x", DType::f32, {3, 2});
    tj::ParamTree params(t, w);
    Tensor y = tj::linear(x, params["w"], params["b"]);
    return std::vector<Tensor>{tj::maximum(x, 0.0), tj::minimum(1.0, x), tj::where(x > 0.0, x, -1.0), tj::cast(x <= x * 0.5, DType::f32), y,
                               tj::normalize(x)};
  }, w);
  tj::Bindings in{{"x", NDArray::of<float>({3, 2}, std::vector<float>{-1, 2, 3, 0, 0, 0})}};
  auto out = p.run(in);
  EXPECT_EQ(values(out[0]), (std::vector<float>{0, 2, 3, 0, 0, 0}));
  EXPECT_EQ(values(out[1]), (std::vector<float>{-1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(values(out[2]), (std::vector<float>{-1, 2, 3, -1, -1, -1}));
  EXPECT_EQ(values(out[3]), (std::vector<float>{1, 0, 0, 1, 1, 1}));  // x <= x/2: negatives and zeros
  EXPECT_EQ(values(out[4]), (std::vector<float>{5.5f, 5.5f, 3.5f, 5.5f, 0.5f, -0.5f}));  // x @ w + b
  std::vector<float> n = values(out[5]);
  EXPECT_NEAR(n[0], -1 / std::sqrt(5.0), 1e-6);
  EXPECT_NEAR(n[1], 2 / std::sqrt(5.0), 1e-6);
  EXPECT_EQ(n[2], 1.0f);
  EXPECT_EQ(n[4], 0.0f);  // a zero row stays zero (eps), not NaN
}

TEST_F(Authoring, ParamTreeByPrefix) {
  std::string path = tj::testing::scratch_dir("authoring") + "/tree.safetensors";
  tj::write_safetensors(path, {{"layers.0.w", NDArray::of<float>({2, 2}, std::vector<float>{1, 0, 0, 1})},
                               {"layers.1.w", NDArray::of<float>({2, 2}, std::vector<float>{2, 0, 0, 2})},
                               {"head", NDArray::of<float>({2}, std::vector<float>{1, 1})}});
  tj::SafetensorsFile f(path);
  tj::Tracer t("tree");
  tj::ParamTree root(t, f);
  Tensor x = t.input("x", DType::f32, {1, 2});
  for (int l = 0; l < 2; ++l) x = tj::linear(x, root.sub("layers." + std::to_string(l))["w"]);
  Tensor again = root.sub("layers.0")["w"];  // the same param, not a second one
  EXPECT_EQ(again.shape(), (tj::Shape{2, 2}));
  EXPECT_TRUE(root.has("head"));
  EXPECT_FALSE(root.sub("layers.0").has("bias"));
  try {
    (void)root.sub("layers.2")["w"];
    ADD_FAILURE();
  } catch (const tj::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'layers.2.w'"), std::string::npos) << e.what();
  }
  tj::TracedGraph g = t.finish({x * root["head"]});
  EXPECT_EQ(g.params().size(), 3u);
  tj::Program p = tj::Program::compile(g, f);
  tj::Bindings in{{"x", NDArray::of<float>({1, 2}, std::vector<float>{3, 4})}};
  EXPECT_EQ(values(p.run(in)[0]), (std::vector<float>{6, 8}));
}

// Named arguments: read by name, guarded like positional ones, donated
// caches updated in the caller's map; a one-result function needs no vector.
TEST_F(Authoring, JitWithNamedArguments) {
  auto f = tj::jit("named", [](tj::JitArgs& a) {
    Tensor y = tj::kv_write(a.tensor("cache"), a.tensor("rows"), a.tensor("pos"));
    if (a.flag("double")) y = y * 2.0;
    return y;
  });
  tj::Bindings args{{"cache", NDArray(DType::f32, {1, 1, 4, 2})},
                    {"rows", NDArray::of<float>({1, 1, 1, 2}, std::vector<float>{1, 2})},
                    {"pos", NDArray::of<int64_t>({}, std::vector<int64_t>{1})}};
  auto out = f(args, {{"double", false}});
  EXPECT_EQ(out[0].data<float>()[2], 1.0f);
  EXPECT_EQ(args.at("cache").data<float>()[3], 2.0f);  // donated: updated in the caller's map
  args.at("pos") = NDArray::of<int64_t>({}, std::vector<int64_t>{2});
  out = f(args, {{"double", false}});
  EXPECT_EQ(f.stats().compilations, 1);
  out = f(args, {{"double", true}});
  EXPECT_EQ(f.stats().compilations, 2);  // the flag is a guard
  EXPECT_EQ(out[0].data<float>()[4], 2.0f);
  tj::Bindings wrong{{"cache", NDArray(DType::f32, {1, 1, 4, 2})}, {"row", NDArray(DType::f32, {1, 1, 1, 2})}};
  EXPECT_THROW(f(wrong, {{"double", false}}), tj::Error);
  try {
    f({NDArray(DType::f32, {1})});
    ADD_FAILURE();
  } catch (const tj::Error& e) {
    EXPECT_NE(std::string(e.what()).find("positional arguments after named ones"), std::string::npos) << e.what();
  }
  auto g = tj::jit("by_name", [](tj::JitArgs& a) { return tj::exp(a.tensor("x")); });
  try {
    g({NDArray(DType::f32, {1})});
    ADD_FAILURE();
  } catch (const tj::Error& e) {
    EXPECT_NE(std::string(e.what()).find("by name, but was called with positional arguments"), std::string::npos) << e.what();
  }
}

}  // namespace
