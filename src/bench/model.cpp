#include "bench/model.h"

#include "bench/args.h"
#include "frontend/onnx/import.h"
#include "models/branches.h"
#include "models/llama.h"
#include "reference/random_inputs.h"
#include "support/timing.h"
#include "tensorjit/compile.h"
#include "tensorjit/error.h"

namespace tj::bench {

Graph trace_model(const ModelSpec& a) {
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

std::vector<std::string> spec_argv(const ModelSpec& a) {
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

DType main_format(const ModelSpec& a) { return a.weights == "all" ? DType::f32 : weights_format(a.weights); }

CompileOptions compile_options(const ModelSpec& a) {
  CompileOptions co;
  co.weights = main_format(a);
  co.device = parse_device(a.device);
  return co;
}

Model make_model(const ModelSpec& a, double* trace_seconds) {
  Model m;
  auto t0 = Clock::now();
  Bindings onnx_params;
  if (a.ir.size() > 5 && a.ir.ends_with(".onnx")) {
    auto o = onnx_import::import_file(a.ir);
    m.graph = std::move(o.graph);
    onnx_params = std::move(o.params);
  } else {
    m.graph = trace_model(a);
  }
  if (trace_seconds) *trace_seconds = seconds_since(t0);
  RandomInputOptions ro;
  ro.seed = 7;
  if (m.graph.find("pos") >= 0) ro.fixed["pos"] = 0;
  for (const auto& s : a.syms) {
    auto [k, val] = split_eq(s, "--sym");
    ro.sizes[k] = size_arg(val, "--sym " + k);
  }
  for (const auto& s : a.sets) {
    auto [k, val] = split_eq(s, "--set");
    if (m.graph.find(k) < 0) throw Error("--set: the graph has no input named '" + k + "'");
    ro.fixed[k] = parse_number(val, "--set " + k);
  }
  for (const auto& [k, w] : onnx_params) ro.given.insert(k);  // the model's own weights: none made for them
  Bindings all = random_inputs(m.graph, ro);
  for (auto& [k, w] : onnx_params) all[k] = std::move(w);
  m.sizes = ro.sizes;
  if (a.ir.empty() && a.model != "branches") {
    const auto& c = models::llama_config(a.config);
    DType dt = dtype_arg(a.dtype);
    if (all.count("rope_cos")) {
      all["rope_cos"] = models::rope_table_array(c, false, dt);
      all["rope_sin"] = models::rope_table_array(c, true, dt);
    }
    // Decode at the cache's last row, prefill at 0.
    if (all.count("pos") && a.mode == "decode") {
      for (const auto& [name, arr] : all)
        if (name.rfind("k_cache", 0) == 0) all["pos"] = NDArray::scalar(DType::i64, static_cast<double>(arr.shape()[2] - 1));
    }
  }
  for (auto& [k, v] : all) (m.graph.node(m.graph.find(k)).op == Op::param ? m.params : m.inputs)[k] = std::move(v);
  return m;
}

}  // namespace tj::bench
