// quantize_weights' formats, element by element: bf16 is f32 rounded to
// nearest even (ties included), and int8 is round(w / s) with s = max|w|/127
// per output column, as stored in f32 (a column of zeros gets 1). Checked
// against an independent rounding on the bits, not the pass's own code.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "ir/graph.h"
#include "passes/passes.h"

namespace tj {
namespace {

constexpr int64_t K = 64, N = 64;

// x @ W with W a constant of these values, [K, N] row-major.
Graph product_of(const std::vector<float>& w) {
  Graph g("q");
  ValueId x = g.add_input("x", {DType::f32, {2, K}});
  ValueId c = g.add_const({DType::f32, {K, N}}, std::vector<double>(w.begin(), w.end()));
  g.set_outputs({g.add(Op::matmul, {x, c})});
  return g;
}

const Node* constant_of(const Graph& g, DType t) {
  for (const Node& n : g.nodes())
    if (n.op == Op::constant && n.type.dtype == t && n.type.rank() == 2) return &n;
  return nullptr;
}

// Round to nearest even on the bits: what a bf16 of an f32 is.
uint16_t bf16_bits(float f) {
  uint32_t b = std::bit_cast<uint32_t>(f);
  return static_cast<uint16_t>((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
}

TEST(QuantizeWeights, Bf16IsRoundedToNearestEven) {
  std::vector<float> w(K * N);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i) * 0.37f) * 3.0f;
  // Ties: exactly halfway between two bf16 values, to the even one.
  w[0] = std::bit_cast<float>(0x3F808000u);   // 1 + 2^-8: halfway between 1 and 1 + 2^-7, to 1
  w[1] = std::bit_cast<float>(0x3F818000u);   // 1 + 3*2^-8: to 1 + 2^-6 (even)
  w[2] = std::bit_cast<float>(0xBF808001u);   // just past halfway: away from zero
  w[3] = std::bit_cast<float>(0x7F7FFFFFu);   // f32's largest: rounds up to bf16's infinity
  w[4] = std::bit_cast<float>(0x00000001u);   // the least subnormal: to zero
  w[5] = -0.0f;
  Graph g = product_of(w);
  PassOptions o;
  o.weights = DType::bf16;
  ASSERT_TRUE(quantize_weights(g, o));
  const Node* b = constant_of(g, DType::bf16);
  ASSERT_NE(b, nullptr);
  const auto* got = static_cast<const uint16_t*>(b->const_data()->raw());
  EXPECT_EQ(got[0], 0x3F80);
  EXPECT_EQ(got[1], 0x3F82);
  EXPECT_EQ(got[2], 0xBF81);
  EXPECT_EQ(got[3], 0x7F80);
  EXPECT_EQ(got[4], 0x0000);
  EXPECT_EQ(got[5], 0x8000);
  for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(got[i], bf16_bits(w[i])) << "element " << i << " of value " << w[i];
}

TEST(QuantizeWeights, Int8HasAScalePerOutputColumn) {
  std::vector<float> w(K * N);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) w[k * N + n] = std::cos(static_cast<float>(k * 7 + n * 3)) * static_cast<float>(n + 1) * 0.01f;
  for (int64_t k = 0; k < K; ++k) w[k * N + 5] = 0;                                        // a column of zeros
  for (int64_t k = 0; k < K; ++k) w[k * N + 6] = static_cast<float>(k % 2 ? k : -k) * 2;  // max |w| = 126
  w[0 * N + 7] = 127, w[1 * N + 7] = 0.5f, w[2 * N + 7] = 1.5f, w[3 * N + 7] = -2.5f;    // scale 1: ties to even
  for (int64_t k = 0; k < K; ++k) w[k * N + 8] = k % 3 ? 1e-44f : -1e-44f;  // subnormal: max/127 is no normal f32, so scale 1
  Graph g = product_of(w);
  PassOptions o;
  o.weights = DType::i8;
  ASSERT_TRUE(quantize_weights(g, o));
  const Node* q = constant_of(g, DType::i8);
  ASSERT_NE(q, nullptr);
  const Node* scale = nullptr;
  for (const Node& n : g.nodes())
    if (n.op == Op::constant && n.type.dtype == DType::f32 && n.type.rank() == 1) scale = &n;
  ASSERT_NE(scale, nullptr);
  const auto* qv = static_cast<const int8_t*>(q->const_data()->raw());
  const auto* sv = static_cast<const float*>(scale->const_data()->raw());
  for (int64_t n = 0; n < N; ++n) {
    float top = 0;
    for (int64_t k = 0; k < K; ++k) top = std::max(top, std::fabs(w[k * N + n]));
    const float f = static_cast<float>(static_cast<double>(top) / 127.0);
    const float s = std::isnormal(f) ? f : 1.0f;
    ASSERT_EQ(std::bit_cast<uint32_t>(sv[n]), std::bit_cast<uint32_t>(s)) << "scale of column " << n;
    for (int64_t k = 0; k < K; ++k) {
      const double want = std::clamp(std::nearbyint(static_cast<double>(w[k * N + n]) / s), -127.0, 127.0);
      ASSERT_EQ(qv[k * N + n], static_cast<int8_t>(want)) << "element " << k << ", " << n;
    }
  }
  EXPECT_EQ(sv[5], 1.0f);
  EXPECT_EQ(sv[8], 1.0f);
  EXPECT_EQ(qv[0 * N + 8], 0);
  EXPECT_EQ(qv[0 * N + 5], 0);
  EXPECT_EQ(qv[0 * N + 7], 127);
  EXPECT_EQ(qv[1 * N + 7], 0);   // 0.5: to even
  EXPECT_EQ(qv[2 * N + 7], 2);   // 1.5: to even
  EXPECT_EQ(qv[3 * N + 7], -2);  // -2.5: to even
  int at_max = 0;
  for (int64_t k = 0; k < K; ++k) at_max += std::abs(qv[k * N + 6]) == 127;
  EXPECT_EQ(at_max, 1);  // only the largest reaches 127
}

TEST(QuantizeWeights, WeightsThatNoScaleHoldsStayF32) {
  std::vector<float> w(K * N, 0.25f);
  w[17] = INFINITY;
  for (DType t : {DType::bf16, DType::i8}) {
    Graph g = product_of(w);
    PassOptions o;
    o.weights = t;
    EXPECT_FALSE(quantize_weights(g, o));
    w[17] = NAN;
  }
}

}  // namespace
}  // namespace tj
