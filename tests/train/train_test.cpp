// The compiled training step (src/train): the optimizers' updates against
// the same arithmetic in double; the step compiled against the step
// interpreted; the tiny Llama learning a repeating sequence; a small
// convnet learning to tell bars apart.
#include <gtest/gtest.h>


#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "compiler/compile.h"
#include "ir/text.h"
#include "models/llama.h"
#include "passes/pipeline.h"
#include "reference/interpreter.h"
#include "reference/random_inputs.h"
#include "support/scratch.h"
#include "tensorjit/nn.h"
#include "train/trainer.h"

namespace tj {
namespace {

class Train : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::use_scratch_cache("train");
  }
};

// loss = mean((x w - y)^2) over [4, 3]: dL/dw = 2/12 x^T (x w - y).
const char* kLinear =
    "graph lin\ninput %x : f32[4,2]\ninput %y : f32[4,3]\nparam %w : f32[2,3]\n%0 = matmul(%x, %w) : f32[4,3]\n"
    "%1 = sub(%0, %y) : f32[4,3]\n%2 = mul(%1, %1) : f32[4,3]\n%3 = mean(%2) {axes=[0, 1]} : f32[]\nreturn %3\n";

// The gradient of kLinear in double.
std::vector<double> linear_grad(const std::vector<double>& x, const std::vector<double>& y, const std::vector<double>& w) {
  std::vector<double> g(6, 0.0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) {
      double r = x[i * 2] * w[j] + x[i * 2 + 1] * w[3 + j] - y[i * 3 + j];
      for (int k = 0; k < 2; ++k) g[k * 3 + j] += 2.0 / 12.0 * x[i * 2 + k] * r;
    }
  return g;
}

TEST_F(Train, OptimizersMatchTheirArithmetic) {
  Graph g = parse_graph(kLinear);
  Bindings data = random_inputs(g, 5);
  Bindings params = {{"w", data.at("w")}};
  const std::vector<double> x = data.at("x").to_vector(), y = data.at("y").to_vector();
  for (auto kind : {OptimizerConfig::Kind::sgd, OptimizerConfig::Kind::adamw}) {
    OptimizerConfig o;
    o.kind = kind;
    o.weight_decay = 0.01;
    Trainer t(g, params, o);
    std::vector<double> w = data.at("w").to_vector(), m(6, 0.0), v(6, 0.0);
    const double lr = 0.1;
    for (int s = 1; s <= 3; ++s) {
      Bindings batch = {{"x", data.at("x")}, {"y", data.at("y")}};
      t.step(batch, lr);
      std::vector<double> gr = linear_grad(x, y, w);
      for (size_t i = 0; i < 6; ++i) {
        if (kind == OptimizerConfig::Kind::sgd) {
          double gi = gr[i] + o.weight_decay * w[i];
          m[i] = o.momentum * m[i] + gi;
          w[i] -= lr * m[i];
        } else {
          m[i] = o.beta1 * m[i] + (1 - o.beta1) * gr[i];
          v[i] = o.beta2 * v[i] + (1 - o.beta2) * gr[i] * gr[i];
          w[i] -= lr * o.weight_decay * w[i];
          w[i] -= lr * (m[i] / (1 - std::pow(o.beta1, s))) / (std::sqrt(v[i] / (1 - std::pow(o.beta2, s))) + o.eps);
        }
      }
      std::vector<double> got = t.params().at("w").to_vector();
      for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(got[i], w[i], 1e-5 * (1 + std::abs(w[i]))) << "step " << s << " w[" << i << "]";
    }
  }
}

// One step of the tiny Llama's loss, compiled, against the same step graph
// interpreted.
TEST_F(Train, CompiledStepMatchesTheInterpreter) {
  const auto& c = models::llama_config("tiny");
  Graph loss = models::trace_llama_loss(c, {2, 12, 12, DType::f32}, 2);
  TrainStep s = training_step(loss);
  int flash = 0;
  for (const Node& n : s.graph.nodes()) flash += n.op == Op::flash_attn;
  EXPECT_EQ(flash, 2);  // each layer's attention matched before differentiating
  RandomInputOptions ro;
  ro.seed = 9;
  ro.fixed["lr"] = 1e-3;
  ro.fixed["step"] = 1;
  Bindings in = random_inputs(s.graph, ro);
  for (const char* r : {"rope_cos", "rope_sin"})
    in[r] = models::rope_table_array(c, r[5] == 's', DType::f32);
  for (auto& [k, v] : in)  // tokens and targets over the vocabulary; state starts at zero
    if (k == "tokens" || k == "targets")
      for (int64_t i = 0; i < v.numel(); ++i) v.set(i, static_cast<double>((i * 37 + (k == "targets")) % c.vocab));
    else if (k.size() > 2 && (k.ends_with(".m") || k.ends_with(".v")))
      v = NDArray(v.dtype(), v.shape());
  auto want = interpret(s.graph, in);
  Executable exe = tj::compile(s.graph, {});
  Bindings run_in = in;
  std::vector<NDArray> got = exe.run(run_in);
  Difference d = compare_outputs(got, want);
  EXPECT_LE(d.max_rel, 1e-3);
  EXPECT_GT(want[0].get(0), 4.0);  // about ln 256 at the start

  // Compiled with its donations: every param and state is updated in its
  // input's array, bit for bit as the step that writes new arrays.
  CompileOptions co;
  co.donate = s.donate;
  Executable donating = tj::compile(s.graph, {}, co);
  Bindings own = in;
  std::vector<NDArray> out;
  RunOptions leave;
  leave.copy_donated_outputs = false;
  donating.run(own, out, leave);
  ASSERT_EQ(s.donate.size() + 1, got.size());
  EXPECT_EQ(out[0].get(0), got[0].get(0));
  const auto& aliases = donating.output_aliases();
  for (const Donation& dn : s.donate) {
    ASSERT_GE(aliases[dn.output], 0) << dn.input << " is not updated in place";
    EXPECT_EQ(out[dn.output].raw(), nullptr);
    const NDArray& a = own.at(dn.input);
    const NDArray& b = got[dn.output];
    ASSERT_EQ(a.nbytes(), b.nbytes());
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << dn.input;
  }
}

// The tiny Llama (1 layer) learns a repeating sequence: the loss falls
// below a fifth of where it starts.
TEST_F(Train, TinyLlamaLearnsARepeatingSequence) {
  const auto& c = models::llama_config("tiny");
  const int64_t B = 2, T = 16;
  Graph loss = models::trace_llama_loss(c, {B, T, T, DType::f32}, 1);
  Bindings init = random_inputs(loss, 1), params;
  for (ValueId p : loss.params()) params[loss.node(p).name] = init.at(loss.node(p).name);
  params["rope_cos"] = models::rope_table_array(c, false, DType::f32);
  params["rope_sin"] = models::rope_table_array(c, true, DType::f32);
  Trainer t(loss, params);
  EXPECT_EQ(t.in_place_bytes(), t.state_bytes());  // params and AdamW state held once
  const std::string text = "tensorjit learns. ";
  auto batch = [&](int step) {
    Bindings b;
    NDArray tokens(DType::i64, {B, T}), targets(DType::i64, {B, T});
    for (int64_t i = 0; i < B; ++i)
      for (int64_t j = 0; j < T; ++j) {
        size_t at = static_cast<size_t>(step * 3 + i * 5 + j);
        tokens.set(i * T + j, static_cast<unsigned char>(text[at % text.size()]));
        targets.set(i * T + j, static_cast<unsigned char>(text[(at + 1) % text.size()]));
      }
    b["tokens"] = tokens, b["targets"] = targets, b["pos"] = NDArray::scalar(DType::i64, 0);
    for (const char* kv : {"k_cache.0", "v_cache.0"}) b[kv] = NDArray(DType::f32, {B, c.n_kv_heads, T, c.head_dim});
    return b;
  };
  double first = 0, last = 0;
  for (int s = 0; s < 60; ++s) {
    Bindings b = batch(s);
    last = t.step(b, 3e-3);
    if (s == 0) first = last;
  }
  EXPECT_GT(first, 4.0);
  EXPECT_LT(last, first / 5) << "from " << first;
}

// A small convnet (conv, relu, max pool, conv, relu, global average pool,
// linear) trained through the conv op's own derivative rules: 12x12 images
// of a horizontal, vertical, diagonal or anti-diagonal bar at a random place
// with noise. After 80 steps the loss on 64 images it never saw is below a
// tenth of ln 4, its start.
TEST_F(Train, SmallConvnetLearnsToTellBarsApart) {
  const int64_t B = 16, S = 12;
  Tracer tr("convnet");
  Tensor x = tr.input("x", DType::f32, {Dim(B), Dim(1), Dim(S), Dim(S)});
  Tensor labels = tr.input("labels", DType::i64, {Dim(B)});
  ConvOptions same;
  same.pad_begin = same.pad_end = {1, 1};
  Tensor h = relu(conv(x, tr.param("w1", DType::f32, {Dim(8), Dim(1), Dim(3), Dim(3)}), tr.param("b1", DType::f32, {Dim(8)}), same));
  PoolOptions pool;
  pool.kernel = pool.stride = {2, 2};
  h = max_pool(h, pool);
  h = relu(conv(h, tr.param("w2", DType::f32, {Dim(16), Dim(8), Dim(3), Dim(3)}), tr.param("b2", DType::f32, {Dim(16)}), same));
  Tensor logits = linear(mean(h, {2, 3}), tr.param("wf", DType::f32, {Dim(16), Dim(4)}), tr.param("bf", DType::f32, {Dim(4)}));
  Graph loss = tr.finish({models::cross_entropy(logits, labels)});

  Bindings init = random_inputs(loss, 5), params;
  for (ValueId p : loss.params()) {
    const std::string& name = loss.node(p).name;
    NDArray v = init.at(name);
    const double scale = name[0] == 'b' ? 0.0 : name == "w1" ? 0.5 : name == "w2" ? 0.3 : 1.0;  // about sqrt(2 / fan_in)
    for (int64_t i = 0; i < v.numel(); ++i) v.set(i, v.get(i) * scale);
    params[name] = v;
  }
  uint64_t rng = 12345;
  auto uniform = [&] {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(rng >> 11) / 9007199254740992.0;
  };
  auto batch = [&] {
    Bindings b;
    NDArray img(DType::f32, {B, 1, S, S}), lab(DType::i64, {B});
    for (int64_t n = 0; n < B; ++n) {
      const int64_t kind = static_cast<int64_t>(uniform() * 4), at = 2 + static_cast<int64_t>(uniform() * (S - 4)),
                    from = static_cast<int64_t>(uniform() * (S - 6));
      for (int64_t i = 0; i < S * S; ++i) img.set(n * S * S + i, 0.2 * uniform());
      for (int64_t j = from; j < from + 6; ++j) {
        const int64_t r = kind == 0 ? at : kind == 1 ? j : kind == 2 ? j : S - 1 - j, c = kind == 0 ? j : kind == 1 ? at : j;
        img.set(n * S * S + r * S + c, 1.0);
      }
      lab.set(n, static_cast<double>(kind));
    }
    b["x"] = img, b["labels"] = lab;
    return b;
  };
  Trainer t(loss, params);
  double first = 0;
  for (int s = 0; s < 80; ++s) {
    Bindings b = batch();
    const double l = t.step(b, 1e-2);
    if (s == 0) first = l;
  }
  EXPECT_NEAR(first, std::log(4.0), 0.5);
  double held_out = 0;
  for (int i = 0; i < 4; ++i) {
    Bindings b = batch();
    for (const auto& [k, v] : t.params()) b[k] = v;
    held_out += interpret(loss, b)[0].get(0) / 4;
  }
  EXPECT_LT(held_out, std::log(4.0) / 10) << "started at " << first;
}

}  // namespace
}  // namespace tj
