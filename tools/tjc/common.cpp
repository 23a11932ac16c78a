#include "tjc/common.h"

#include <charconv>
#include <cmath>

#include "compiler/options.h"
#include "models/llama.h"

namespace tjc {

using namespace tj;

void add_trace_options(CLI::App* c, ModelSpec& a) {
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

void add_size_options(CLI::App* c, ModelSpec& a) {
  c->add_option("--sym", a.syms, "with --ir: the size of a symbolic dim, NAME=N (repeatable)");
  c->add_option("--set", a.sets, "with --ir: every element of an input, NAME=V (repeatable)");
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

}  // namespace tjc
