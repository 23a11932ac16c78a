#include "tjc/common.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "ir/text.h"
#include "models/branches.h"
#include "models/llama.h"
#include "tensorjit/error.h"

namespace tjc {

using namespace tj;

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



Dim dim_arg(const std::string& text, const char* option) {
  try {
    return Dim::parse(text);
  } catch (const Error& e) {
    throw Error(std::string(option) + " '" + text + "': " + e.what());
  }
}

Graph trace_model(const TraceArgs& a) {
  if (!a.ir.empty()) return load_graph(a.ir);
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
  if (a.model == "branches") return models::trace_branches();
  throw Error("unknown model '" + a.model + "' (known: mlp, llama-layer, llama, branches)");
}

void add_trace_options(CLI::App* c, TraceArgs& a) {
  c->add_option("--model", a.model, "mlp, llama-layer, llama, or branches (the memory-reordering example)")
      ->check(CLI::IsMember({"mlp", "llama-layer", "llama", "branches"}));
  c->add_option("--config", a.config, "tiny, tinyllama or llama3-8b")->check(CLI::IsMember(models::llama_config_names()));
  c->add_option("--mode", a.mode, "prefill or decode")->check(CLI::IsMember({"prefill", "decode"}));
  c->add_option("--tokens", a.tokens, "prefill length: a number or a size symbol such as T");
  c->add_option("--kv-len", a.kv_len, "KV cache length: a number or a symbol (prefill default: tokens; decode: 64)");
  c->add_option("--layers", a.layers, "layers of the multi-layer model (default: the config's)")->check(CLI::PositiveNumber);
  c->add_option("--batch", a.batch, "batch size")->check(CLI::PositiveNumber);
  c->add_option("--dtype", a.dtype, "f32, f64, bf16 or f16")->check(CLI::IsMember({"f32", "f64", "bf16", "f16"}));
  c->add_flag("--flash", a.flash, "emit flash_attn directly instead of the unfused attention");
  c->add_option("--ir", a.ir, "read the graph from this IR file (or -) instead of tracing a model");
}

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


}  // namespace tjc
