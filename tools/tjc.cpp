// tjc: the tensorjit command line. Subcommands: trace, fmt, run, demo.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "ir/text.h"
#include "ir/verifier.h"
#include "models/llama.h"
#include "runtime/interpreter.h"
#include "runtime/random_inputs.h"

namespace {

using namespace tj;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string read_source(const std::string& path) {
  if (path == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Graph load_graph(const std::string& path) {
  std::string text = read_source(path);
  try {
    return parse_graph(text);
  } catch (const ParseError& e) {
    throw Error((path == "-" ? std::string("<stdin>") : path) + ":" + e.what());
  }
}

DType dtype_arg(const std::string& s) {
  auto d = parse_dtype(s);
  if (!d) throw Error("unknown dtype '" + s + "'");
  return *d;
}

// --- trace ------------------------------------------------------------------
struct TraceArgs {
  std::string model = "llama-layer", config = "tiny", mode = "prefill", tokens, kv_len, dtype = "f32";
  int64_t layers = 0;
  int64_t batch = 1;
  bool flash = false;
};

Dim dim_arg(const std::string& text, const char* option) {
  try {
    return Dim::parse(text);
  } catch (const Error& e) {
    throw Error(std::string(option) + " '" + text + "': " + e.what());
  }
}

Graph trace_model(const TraceArgs& a) {
  const models::LlamaConfig& cfg = models::llama_config(a.config);
  models::Shapes s;
  s.dtype = dtype_arg(a.dtype);
  s.batch = a.batch;
  if (a.mode == "decode") {
    if (!a.tokens.empty() && a.tokens != "1") throw Error("decode processes one token; --tokens is for prefill");
    s.tokens = 1;
    s.kv_len = dim_arg(a.kv_len.empty() ? "64" : a.kv_len, "--kv-len");
  } else if (a.mode == "prefill") {
    s.tokens = dim_arg(a.tokens.empty() ? "16" : a.tokens, "--tokens");
    s.kv_len = a.kv_len.empty() ? s.tokens : dim_arg(a.kv_len, "--kv-len");
  } else {
    throw Error("--mode must be prefill or decode");
  }
  auto t = s.tokens.as_const(), kv = s.kv_len.as_const();
  if (t && *t < 0) throw Error("--tokens must not be negative");
  if (t && kv && *kv < *t) throw Error("--kv-len " + std::to_string(*kv) + " cannot hold " + std::to_string(*t) + " tokens");
  models::LayerOptions o{a.flash};
  if (a.model == "mlp") return models::trace_mlp(cfg, s);
  if (a.model == "llama-layer") return models::trace_llama_layer(cfg, s, o);
  if (a.model == "llama") return models::trace_llama(cfg, s, a.layers ? a.layers : cfg.n_layers, o);
  throw Error("unknown model '" + a.model + "' (known: mlp, llama-layer, llama)");
}

void add_trace_options(CLI::App* c, TraceArgs& a) {
  c->add_option("--model", a.model, "mlp, llama-layer or llama")->check(CLI::IsMember({"mlp", "llama-layer", "llama"}));
  c->add_option("--config", a.config, "tiny, tinyllama or llama3-8b")->check(CLI::IsMember(models::llama_config_names()));
  c->add_option("--mode", a.mode, "prefill or decode")->check(CLI::IsMember({"prefill", "decode"}));
  c->add_option("--tokens", a.tokens, "prefill length: a number or a size symbol such as T");
  c->add_option("--kv-len", a.kv_len, "KV cache length: a number or a symbol (prefill default: tokens; decode: 64)");
  c->add_option("--layers", a.layers, "layers of the multi-layer model (default: the config's)")->check(CLI::PositiveNumber);
  c->add_option("--batch", a.batch, "batch size")->check(CLI::PositiveNumber);
  c->add_option("--dtype", a.dtype, "f32, f64, bf16 or f16")->check(CLI::IsMember({"f32", "f64", "bf16", "f16"}));
  c->add_flag("--flash", a.flash, "emit flash_attn directly instead of the unfused attention");
}

// --- run --------------------------------------------------------------------
struct RunArgs {
  std::string file, dtype = "f32";
  uint64_t seed = 0;
  std::vector<std::string> syms, sets;
};

std::pair<std::string, std::string> split_eq(const std::string& s, const char* what) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) throw Error(std::string(what) + " expects NAME=VALUE, got '" + s + "'");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

double parse_number(const std::string& s, const std::string& what) {
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  throw Error(what + ": '" + s + "' is not a number");
}

void print_outputs(const std::vector<NDArray>& outs) {
  for (size_t i = 0; i < outs.size(); ++i) {
    const NDArray& a = outs[i];
    double sum = 0, l2 = 0;
    for (int64_t k = 0; k < a.numel(); ++k) {
      double v = a.get(k);
      sum += v;
      l2 += v * v;
    }
    std::printf("output %zu: %s sum=%.10g l2=%.10g\n", i, a.type_str().c_str(), sum, std::sqrt(l2));
  }
}

int cmd_run(const RunArgs& a) {
  Graph g = load_graph(a.file);
  verify(g);
  RandomInputOptions ro;
  ro.seed = a.seed;
  for (const auto& s : a.syms) {
    auto [k, v] = split_eq(s, "--sym");
    ro.sizes[k] = static_cast<int64_t>(parse_number(v, "--sym " + k));
  }
  for (const auto& s : a.sets) {
    auto [k, v] = split_eq(s, "--set");
    if (g.find(k) < 0) throw Error("--set: the graph has no input named '" + k + "'");
    ro.fixed[k] = parse_number(v, "--set " + k);
  }
  Bindings in = random_inputs(g, ro);
  auto t0 = Clock::now();
  auto outs = interpret(g, in, {dtype_arg(a.dtype)});
  double dt = seconds_since(t0);
  print_outputs(outs);
  std::fprintf(stderr, "interpreted %zu nodes in %.3f ms (%s)\n", g.size(), dt * 1e3, a.dtype.c_str());
  return 0;
}

// --- demo -------------------------------------------------------------------
int64_t argmax_last_row(const NDArray& logits) {
  int64_t V = logits.shape().back();
  int64_t base = logits.numel() - V;
  int64_t best = 0;
  for (int64_t j = 1; j < V; ++j)
    if (logits.get(base + j) > logits.get(base + best)) best = j;
  return best;
}

int cmd_demo() {
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

  std::vector<int64_t> generated;
  double decode_s = 0;
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
    outs = interpret(decode, in);
    decode_s += seconds_since(t0);
  }
  std::printf("decode: %lld steps (KV cache length %lld, greedy) on the interpreter: %.3f ms per step\n", (long long)steps,
              (long long)S, decode_s / static_cast<double>(steps) * 1e3);
  std::printf("generated tokens:");
  for (int64_t t : generated) std::printf(" %lld", (long long)t);
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tjc: the tensorjit compiler driver"};
  app.require_subcommand(1);

  TraceArgs ta;
  auto* trace = app.add_subcommand("trace", "trace a model and print its graph");
  add_trace_options(trace, ta);

  std::string fmt_file;
  auto* fmt = app.add_subcommand("fmt", "parse IR text and print it back");
  fmt->add_option("file", fmt_file, "IR file, or - for stdin")->required();

  RunArgs ra;
  auto* run = app.add_subcommand("run", "interpret a graph on seeded random inputs");
  run->add_option("file", ra.file, "IR file, or - for stdin")->required();
  run->add_option("--dtype", ra.dtype, "compute dtype: f32 or f64")->check(CLI::IsMember({"f32", "f64"}));
  run->add_option("--seed", ra.seed, "random seed");
  run->add_option("--sym", ra.syms, "size of a symbolic dim, NAME=N (repeatable)");
  run->add_option("--set", ra.sets, "value of a scalar input, NAME=V (repeatable)");

  auto* demo = app.add_subcommand("demo", "the main job: trace the tiny Llama, prefill and decode on the interpreter");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (*trace) {
      auto t0 = Clock::now();
      Graph g = trace_model(ta);
      double dt = seconds_since(t0);
      std::string text = print_graph(g);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fprintf(stderr, "traced %zu nodes in %.2f ms\n", g.size(), dt * 1e3);
    } else if (*fmt) {
      std::string text = print_graph(load_graph(fmt_file));
      std::fwrite(text.data(), 1, text.size(), stdout);
    } else if (*run) {
      return cmd_run(ra);
    } else if (*demo) {
      return cmd_demo();
    }
  } catch (const tj::Error& e) {
    std::fprintf(stderr, "tjc: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tjc: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
