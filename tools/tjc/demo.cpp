// tjc demo: the main job.
#include <algorithm>
#include <cstdio>

#include "ir/verifier.h"
#include "models/llama.h"
#include "passes/pipeline.h"
#include "schedule/fusion.h"
#include "runtime/interpreter.h"
#include "runtime/random_inputs.h"
#include "tjc/common.h"

namespace tjc {

using namespace tj;

namespace {

int64_t argmax_last_row(const NDArray& logits) {
  int64_t V = logits.shape().back();
  int64_t base = logits.numel() - V;
  int64_t best = 0;
  for (int64_t j = 1; j < V; ++j)
    if (logits.get(base + j) > logits.get(base + best)) best = j;
  return best;
}

void cmd_demo() {
  const auto& cfg = models::llama_config("tiny");
  const int64_t prompt = 16, steps = 8, S = prompt + steps;
  std::printf("tensorjit demo: the tiny Llama (d=%lld, %lld/%lld heads, head dim %lld, FFN %lld, %lld layers, vocab %lld)\n",
              (long long)cfg.d_model, (long long)cfg.n_heads, (long long)cfg.n_kv_heads, (long long)cfg.head_dim,
              (long long)cfg.ffn, (long long)cfg.n_layers, (long long)cfg.vocab);

  auto t0 = Clock::now();
  Graph prefill = models::trace_llama(cfg, {1, prompt, S, DType::f32}, cfg.n_layers);
  Graph decode = models::trace_llama(cfg, {1, 1, S, DType::f32}, cfg.n_layers);
  verify(prefill);
  verify(decode);
  double trace_s = seconds_since(t0);
  std::printf("traced prefill (%zu nodes) and decode (%zu nodes) graphs in %.2f ms\n", prefill.size(), decode.size(),
              trace_s * 1e3);

  // Weights and a prompt, seeded; real RoPE tables.
  RandomInputOptions ro;
  ro.seed = 42;
  Bindings in = random_inputs(prefill, ro);
  in["rope_cos"] = NDArray::from(DType::f32, {cfg.max_pos, cfg.head_dim / 2}, models::rope_table(cfg, false));
  in["rope_sin"] = NDArray::from(DType::f32, {cfg.max_pos, cfg.head_dim / 2}, models::rope_table(cfg, true));
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    in["k_cache." + std::to_string(l)] = NDArray(DType::f32, {1, cfg.n_kv_heads, S, cfg.head_dim});
    in["v_cache." + std::to_string(l)] = NDArray(DType::f32, {1, cfg.n_kv_heads, S, cfg.head_dim});
  }
  in["pos"] = NDArray::scalar(DType::i64, 0);
  std::printf("prompt tokens:");
  for (int64_t i = 0; i < prompt; ++i) std::printf(" %lld", (long long)in["tokens"].get(i));
  std::printf("\n");

  t0 = Clock::now();
  auto outs = interpret(prefill, in);
  double prefill_s = seconds_since(t0);
  std::printf("prefill: %lld tokens at position 0 on the interpreter (f32): %.2f ms\n", (long long)prompt, prefill_s * 1e3);

  // The decode graph, optimized with the weights frozen, then fused.
  t0 = Clock::now();
  Graph optimized = decode;
  PipelineOptions po;
  po.pass.freeze_values = &in;
  run_pipeline(optimized, default_pipeline(true), po);
  double opt_s = seconds_since(t0);
  Schedule kernels = fuse(optimized);
  int flash = 0;
  for (const Node& n : optimized.nodes()) flash += n.op == Op::flash_attn;
  std::printf("optimized decode graph (frozen weights): %lld -> %lld ops, %d flash_attn, %zu fused kernels, in %.1f ms\n",
              (long long)count_nodes(decode).total_ops, (long long)count_nodes(optimized).total_ops, flash,
              kernels.kernels.size(), opt_s * 1e3);

  std::vector<int64_t> generated;
  double decode_s = 0, optimized_s = 0, max_rel = 0;
  for (int64_t step = 0; step < steps; ++step) {
    int64_t next = argmax_last_row(outs[0]);
    generated.push_back(next);
    in["tokens"] = NDArray::from(DType::i64, {1, 1}, {static_cast<double>(next)});
    in["pos"] = NDArray::scalar(DType::i64, static_cast<double>(prompt + step));
    for (int64_t l = 0; l < cfg.n_layers; ++l) {
      in["k_cache." + std::to_string(l)] = std::move(outs[static_cast<size_t>(1 + 2 * l)]);
      in["v_cache." + std::to_string(l)] = std::move(outs[static_cast<size_t>(2 + 2 * l)]);
    }
    t0 = Clock::now();
    auto fast = interpret(optimized, in);
    optimized_s += seconds_since(t0);
    t0 = Clock::now();
    outs = interpret(decode, in);
    decode_s += seconds_since(t0);
    max_rel = std::max(max_rel, compare_outputs(fast, outs).max_rel);
  }
  // The optimized graph is decomposed for fusion: more, smaller ops, which an
  // op-by-op interpreter does not profit from; compiled code will.
  std::printf("decode: %lld steps (KV cache length %lld, greedy) on the interpreter: %.3f ms per step traced, %.3f ms optimized\n",
              (long long)steps, (long long)S, decode_s / static_cast<double>(steps) * 1e3,
              optimized_s / static_cast<double>(steps) * 1e3);
  std::printf("optimized vs traced outputs (f32): max relative difference %.2e\n", max_rel);
  std::printf("generated tokens:");
  for (int64_t t : generated) std::printf(" %lld", (long long)t);
  std::printf("\n");
}

}  // namespace

void add_demo_command(CLI::App& app) {
  app.add_subcommand("demo", "the main job: trace the tiny Llama, prefill and decode on the interpreter")->callback(cmd_demo);
}

}  // namespace tjc
