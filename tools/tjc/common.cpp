#include "tjc/common.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "compiler/options.h"
#include "frontend/onnx/import.h"
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
  if (path.ends_with(".onnx")) return onnx_import::import_file(path).graph;
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
  if (t && (*t < 1 || *t > kMaxTokens)) throw Error("--tokens must be in 1.." + std::to_string(kMaxTokens) + ", got " + std::to_string(*t));
  if (kv && (*kv < 1 || *kv > kMaxTokens)) throw Error("--kv-len must be in 1.." + std::to_string(kMaxTokens) + ", got " + std::to_string(*kv));
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
  c->add_option("--config", a.config, "tiny, tinyllama, llama3-8b or minilm-size")->check(CLI::IsMember(models::llama_config_names()));
  c->add_option("--mode", a.mode, "prefill or decode")->check(CLI::IsMember({"prefill", "decode"}));
  c->add_option("--tokens", a.tokens, "prefill length: a number or a size symbol such as T");
  c->add_option("--kv-len", a.kv_len, "KV cache length: a number or a symbol (prefill default: tokens; decode: 64)");
  c->add_option("--layers", a.layers, "layers of the multi-layer model (default: the config's)")->check(CLI::Range(int64_t{1}, kMaxLayers));
  c->add_option("--batch", a.batch, "batch size")->check(CLI::Range(int64_t{1}, kMaxBatch));
  c->add_option("--dtype", a.dtype, "f32, f64, bf16 or f16")->check(CLI::IsMember({"f32", "f64", "bf16", "f16"}));
  c->add_flag("--flash", a.flash, "emit flash_attn directly instead of the unfused attention");
  c->add_option("--ir", a.ir, "read the graph from this IR file (or -) instead of tracing a model");
}

std::vector<std::string> trace_argv(const TraceArgs& a) {
  if (a.ir == "-") throw Error("a fresh process cannot read the IR from standard input: give --ir a file");
  std::vector<std::string> r = {"--model", a.model, "--config", a.config, "--mode", a.mode, "--dtype", a.dtype,
                                "--batch", std::to_string(a.batch)};
  if (!a.tokens.empty()) r.insert(r.end(), {"--tokens", a.tokens});
  if (!a.kv_len.empty()) r.insert(r.end(), {"--kv-len", a.kv_len});
  if (a.layers > 0) r.insert(r.end(), {"--layers", std::to_string(a.layers)});
  if (a.flash) r.push_back("--flash");
  if (a.weights != "f32") r.insert(r.end(), {"--weights", a.weights});
  if (a.device != "cpu") r.insert(r.end(), {"--device", a.device});
  if (!a.ir.empty()) r.insert(r.end(), {"--ir", a.ir});
  for (const auto& x : a.syms) r.insert(r.end(), {"--sym", x});
  for (const auto& x : a.sets) r.insert(r.end(), {"--set", x});
  return r;
}

void add_weights_option(CLI::App* c, std::string& format, std::vector<std::string> extra) {
  std::vector<std::string> names = {"f32", "bf16", "int8"};
  std::string help = "the matrix products' frozen weights stored as f32, bf16 or int8 (a scale per output channel)";
  for (const auto& e : extra) names.push_back(e), help += ", or " + e;
  c->add_option("--weights,--weight-format", format, help)->check(CLI::IsMember(names));
}

void add_device_option(CLI::App* c, std::string& device) {
  const std::vector<std::string_view> names = tj::device_names();
  c->add_option("--device", device, "where the compiled code runs: " + tj::device_list(true))
      ->check(CLI::IsMember(std::vector<std::string>(names.begin(), names.end())));
}

void add_size_options(CLI::App* c, TraceArgs& a) {
  c->add_option("--sym", a.syms, "with --ir: the size of a symbolic dim, NAME=N (repeatable)");
  c->add_option("--set", a.sets, "with --ir: every element of an input, NAME=V (repeatable)");
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

int64_t int_arg(const std::string& s, const std::string& what, int64_t lo, int64_t hi) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  bool whole = ec == std::errc() && end == s.data() + s.size() && !s.empty();
  if (!whole || v < lo || v > hi) {
    std::string range = lo == 0 ? "a non-negative integer" : "an integer";
    throw Error(what + ": '" + s + "' is not " + range + " <= " + std::to_string(hi) +
                (lo == 0 ? "" : " and >= " + std::to_string(lo)));
  }
  return v;
}

int64_t size_arg(const std::string& s, const std::string& what) { return int_arg(s, what, 0, kMaxSize); }

void set_element(NDArray& a, int64_t k, const std::string& text, const std::string& what) {
  DType t = a.dtype();
  const std::string type(dtype_name(t));
  if (t == DType::boolean) {
    bool v;
    if (text == "0" || text == "false") v = false;
    else if (text == "1" || text == "true") v = true;
    else throw Error(what + ": '" + text + "' is not a bool (0, 1, false or true)");
    a.data<uint8_t>()[k] = v;
  } else if (t == DType::u64) {
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty())
      throw Error(what + ": '" + text + "' is not a u64 (0 to 18446744073709551615)");
    a.data<uint64_t>()[k] = v;
  } else if (t == DType::i64) {
    a.data<int64_t>()[k] = int_arg(text, what + " (i64)", INT64_MIN, INT64_MAX);
  } else if (is_int(t)) {
    store_int(a.raw(), k, t, int_arg(text, what + " (" + type + ")", static_cast<int64_t>(int_min(t)), static_cast<int64_t>(int_max(t))));
  } else {
    double v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty())
      throw Error(what + ": '" + text + "' is not a " + type + " number (or nan, inf, -inf)");
    if (std::isfinite(v) && !std::isfinite(round_to_dtype(v, t))) throw Error(what + ": " + text + " is out of range for " + type);
    a.set(k, v);
  }
}

CLI::Validator finite_range(double lo, double hi) {
  std::string desc = "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        double v = 0;
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v < lo || v > hi)
          return "'" + s + "' is not a number in [" + CLI::detail::to_string(lo) + ", " + CLI::detail::to_string(hi) + "]";
        return "";
      },
      desc);
}

CLI::Validator seed_check() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        uint64_t v = 0;
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return "'" + s + "' is not an integer in 0 .. 2^64-1";
        return "";
      },
      "0 .. 2^64-1");
}

void make_folder(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("cannot create folder '" + dir + "': " + ec.message());
  if (!std::filesystem::is_directory(dir, ec)) throw Error("cannot create folder '" + dir + "': it exists and is not a folder");
}

}  // namespace tjc
