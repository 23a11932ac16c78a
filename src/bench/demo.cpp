#include "bench/demo.h"

#include <algorithm>
#include <cstdio>

#include "compiler/compile.h"
#include "ir/verifier.h"
#include "models/llama.h"
#include "passes/pipeline.h"
#include "reference/interpreter.h"
#include "reference/random_inputs.h"
#include "support/timing.h"
#include "tensorjit/error.h"

namespace tj::bench {

namespace {

int64_t argmax_last_row(const NDArray& logits) {
  int64_t V = logits.shape().back();
  int64_t base = logits.numel() - V;
  int64_t best = 0;
  for (int64_t j = 1; j < V; ++j)
    if (logits.get(base + j) > logits.get(base + best)) best = j;
  return best;
}

}  // namespace

void run_demo() {
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
  in["rope_cos"] = models::rope_table_array(cfg, false, DType::f32);
  in["rope_sin"] = models::rope_table_array(cfg, true, DType::f32);
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    in["k_cache." + std::to_string(l)] = NDArray(DType::f32, {1, cfg.n_kv_heads, S, cfg.head_dim});
    in["v_cache." + std::to_string(l)] = NDArray(DType::f32, {1, cfg.n_kv_heads, S, cfg.head_dim});
  }
  in["pos"] = NDArray::scalar(DType::i64, 0);
  std::printf("prompt tokens:");
  for (int64_t i = 0; i < prompt; ++i) std::printf(" %lld", (long long)in["tokens"].get(i));
  std::printf("\n");

  // Compile both graphs: weights frozen, optimized, fused, generated C++.
  Bindings weights, state;
  for (const auto& [k, v] : in) (prefill.node(prefill.find(k)).op == Op::param ? weights : state)[k] = v;
  t0 = Clock::now();
  Executable cprefill = tj::compile(prefill, weights);
  Executable cdecode = tj::compile(decode, weights);
  double compile_s = seconds_since(t0);
  int flash = 0;
  for (const Node& n : cdecode.optimized().nodes()) flash += n.op == Op::flash_attn;
  std::printf("compiled prefill (%zu kernels) and decode (%zu kernels, %d flash_attn) in %.2f s%s\n", cprefill.stats().kernels,
              cdecode.stats().kernels, flash, compile_s,
              cprefill.stats().compiled ? (cdecode.stats().cache_hit ? " (cache hit)" : "") : " (no compiler: interpreter)");

  // Prefill and greedy decode, on the interpreter and compiled, step by step.
  Bindings interp_in = in, comp_in = state;
  double max_rel = 0;
  std::vector<double> t_interp, t_comp;  // per decode step
  std::vector<int64_t> generated, generated_c;
  std::vector<NDArray> outs, couts;
  for (int64_t step = 0; step <= steps; ++step) {
    const Graph& g = step == 0 ? prefill : decode;
    Executable& exe = step == 0 ? cprefill : cdecode;
    t0 = Clock::now();
    outs = interpret(g, interp_in);
    double ti = seconds_since(t0);
    t0 = Clock::now();
    exe.run(comp_in, couts);
    double tc = seconds_since(t0);
    if (step > 0) t_interp.push_back(ti), t_comp.push_back(tc);
    if (step == 0)
      std::printf("prefill: %lld tokens at position 0: interpreter %.2f ms, compiled %.3f ms\n", (long long)prompt, ti * 1e3, tc * 1e3);
    max_rel = std::max(max_rel, compare_outputs(couts, outs).max_rel);
    if (step == steps) break;
    int64_t next = argmax_last_row(outs[0]);
    generated.push_back(next);
    generated_c.push_back(argmax_last_row(couts[0]));
    // Both continue from the interpreter's token; each keeps its own caches.
    interp_in["tokens"] = comp_in["tokens"] = NDArray::from(DType::i64, {1, 1}, {static_cast<double>(next)});
    interp_in["pos"] = comp_in["pos"] = NDArray::scalar(DType::i64, static_cast<double>(prompt + step));
    for (int64_t l = 0; l < cfg.n_layers; ++l) {
      std::string k = "k_cache." + std::to_string(l), v = "v_cache." + std::to_string(l);
      interp_in[k] = std::move(outs[static_cast<size_t>(1 + 2 * l)]);
      interp_in[v] = std::move(outs[static_cast<size_t>(2 + 2 * l)]);
      comp_in[k] = couts[static_cast<size_t>(1 + 2 * l)];
      comp_in[v] = couts[static_cast<size_t>(2 + 2 * l)];
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  double mi = median(t_interp), mc = median(t_comp);
  // Interleaved with the interpreter, so the compiled steps start with cold caches; tjc bench measures them warm.
  std::printf("decode: %lld greedy steps (KV cache length %lld), median per step: interpreter %.3f ms, compiled %.1f us (%.0fx)\n",
              (long long)steps, (long long)S, mi * 1e3, mc * 1e6, mi / std::max(mc, 1e-12));
  std::printf("compiled vs interpreter: max relative difference %.2e over every step's logits and caches; same tokens: %s\n", max_rel,
              generated == generated_c ? "yes" : "NO");
  std::printf("generated tokens:");
  for (int64_t t : generated) std::printf(" %lld", (long long)t);
  std::printf("\n");
  if (generated != generated_c || max_rel > 1e-4) throw Error("demo: compiled results differ from the interpreter");
}

}  // namespace tj::bench
