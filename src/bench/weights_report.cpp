#include "bench/weights_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "compiler/compile.h"
#include "models/llama.h"
#include "reference/interpreter.h"
#include "reference/random_inputs.h"
#include "support/timing.h"
#include "tensorjit/error.h"
#include "tune/calibrate.h"

namespace tj::bench {

namespace {

std::string format_name(DType t) { return t == DType::i8 ? "int8" : std::string(dtype_name(t)); }

Executable compile_as(const Graph& g, const Bindings& params, DType weights) {
  CompileOptions co;
  co.weights = weights;
  Executable e = tj::compile(g, params, co);
  if (!e.stats().compiled) throw Error("bench --weights: no C++ compiler, nothing to compare");
  return e;
}

// How far `got` is from `want`: the largest difference over the largest
// magnitude, the mean difference over the mean magnitude, and the least
// cosine of a row (along the last axis: a token's logits or hidden state,
// a sentence's embedding).
struct Agreement {
  double max_rel = 0, mean_rel = 0, min_cosine = 1;
};

Agreement agreement(const NDArray& got, const NDArray& want) {
  if (got.numel() != want.numel()) throw Error("bench --weights: outputs of different sizes");
  Agreement r;
  double max_diff = 0, max_mag = 0, sum_diff = 0, sum_mag = 0;
  const int64_t n = want.numel(), row = want.shape().empty() ? 1 : std::max<int64_t>(want.shape().back(), 1);
  for (int64_t start = 0; start < n; start += row) {
    double dot = 0, gg = 0, ww = 0;
    for (int64_t k = start; k < std::min(n, start + row); ++k) {
      const double g = got.get(k), w = want.get(k);
      max_diff = std::max(max_diff, std::fabs(g - w)), max_mag = std::max(max_mag, std::fabs(w));
      sum_diff += std::fabs(g - w), sum_mag += std::fabs(w);
      dot += g * w, gg += g * g, ww += w * w;
    }
    if (gg > 0 && ww > 0) r.min_cosine = std::min(r.min_cosine, dot / std::sqrt(gg * ww));
    else if (gg != ww) r.min_cosine = 0;  // one row all zeros, the other not
  }
  r.max_rel = max_mag > 0 ? max_diff / max_mag : max_diff;
  r.mean_rel = sum_mag > 0 ? sum_diff / sum_mag : sum_diff;
  return r;
}

}  // namespace

int64_t stored_weight_bytes(const Executable& e, const Bindings& params) {
  int64_t bytes = 0;
  for (const auto& [name, w] : params)
    if (name.rfind("rope_", 0) != 0) bytes += static_cast<int64_t>(w.nbytes());
  for (const Node& n : e.optimized().nodes()) {
    // Converted weights: constants, or the program cache's tj.const.N
    // params; [K, N], or int8 packed as [N/16, K, 16].
    const bool held = n.op == Op::constant || n.op == Op::param;
    const bool packed = n.type.dtype == DType::i8 && n.type.rank() == 3 && n.type.shape[2] == Dim(16);
    if (!held || (n.type.dtype != DType::bf16 && n.type.dtype != DType::i8) || (n.type.rank() != 2 && !packed)) continue;
    const int64_t numel = numel_const(n.type.shape).value_or(0);
    bytes += numel * dtype_size(n.type.dtype) - numel * 4;
    if (n.type.dtype == DType::i8) bytes += (packed ? n.type.shape[0].value() * 16 : n.type.shape[1].value()) * 4;  // the scales
  }
  return bytes;
}

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int64_t argmax_row(const NDArray& logits, int64_t row) {
  const int64_t V = logits.shape().back();
  int64_t best = 0;
  for (int64_t j = 1; j < V; ++j)
    if (logits.get(row * V + j) > logits.get(row * V + best)) best = j;
  return best;
}

// Mean over t < T-1 of log softmax(logits[t])[tokens[t+1]].
double mean_log_likelihood(const NDArray& logits, const std::vector<int64_t>& tokens) {
  const int64_t V = logits.shape().back();
  double sum = 0;
  for (size_t t = 0; t + 1 < tokens.size(); ++t) {
    const int64_t base = static_cast<int64_t>(t) * V;
    double top = -INFINITY, z = 0;
    for (int64_t j = 0; j < V; ++j) top = std::max(top, logits.get(base + j));
    for (int64_t j = 0; j < V; ++j) z += std::exp(logits.get(base + j) - top);
    sum += logits.get(base + tokens[t + 1]) - top - std::log(z);
  }
  return tokens.size() > 1 ? sum / static_cast<double>(tokens.size() - 1) : 0;
}

}  // namespace

nlohmann::json weight_formats(const Graph& graph, const Bindings& params, const Bindings& inputs, const FormatsArgs& a) {
  std::vector<Executable> exes;
  for (DType f : a.formats) exes.push_back(compile_as(graph, params, f));
  Bindings all = params;
  for (const auto& [k, v] : inputs) all[k] = v;
  const std::vector<NDArray> want = interpret(graph, all, {DType::f32});

  nlohmann::json rows = nlohmann::json::array();
  std::vector<Bindings> run_inputs(exes.size(), inputs);
  for (size_t i = 0; i < exes.size(); ++i) {
    Bindings in = inputs;  // the caches as given: the compiled run writes them in place
    std::vector<NDArray> got;
    exes[i].run(in, got);
    Agreement vs_f32 = agreement(got.at(0), want.at(0));
    // The kernels against the interpreter on the converted weights (the
    // optimized graph holds them): the format's error is not theirs.
    double kernels = 0;
    Bindings held = exes[i].held_params();
    for (const auto& [k, v] : inputs) held[k] = v;
    const std::vector<NDArray> ref = interpret(exes[i].optimized(), held, {DType::f32});
    for (size_t k = 0; k < ref.size(); ++k)
      if (is_float(ref[k].dtype())) kernels = std::max(kernels, agreement(got.at(k), ref[k]).max_rel);
    rows.push_back({{"weights", format_name(a.formats[i])},
                    {"weight_mb", static_cast<double>(stored_weight_bytes(exes[i], params)) / 1e6},
                    {"max_rel_err", vs_f32.max_rel},
                    {"mean_rel_err", vs_f32.mean_rel},
                    {"min_cosine", vs_f32.min_cosine},
                    {"kernels_vs_reference", kernels},
                    {"kernels", exes[i].stats().kernels}});
  }

  // Interleaved rounds: the same noise for every format, and the bandwidth
  // measured beside them.
  RunOptions in_place;
  in_place.copy_donated_outputs = false;
  std::vector<std::vector<double>> times(exes.size());
  std::vector<double> bandwidth;
  const int rounds = std::max(a.rounds, 1);
  for (int r = 0; r < rounds; ++r) {
    bandwidth.push_back(measure_stream_bandwidth());
    for (size_t i = 0; i < exes.size(); ++i) {
      std::vector<NDArray> out;
      auto t = call_seconds([&] { exes[i].run(run_inputs[i], out, in_place); }, 3, a.budget / rounds);
      times[i].insert(times[i].end(), t.begin(), t.end());
    }
  }
  const double bw = median_of(bandwidth);
  double f32_median = 0;
  for (size_t i = 0; i < exes.size(); ++i) {
    Timing t = summarize(times[i]);
    if (i == 0) f32_median = t.median;
    auto& row = rows[i];
    const double limit = std::max(row["weight_mb"].get<double>() * 1e6 / bw, a.compute_limit_s);
    row["median_us"] = t.median * 1e6;
    row["p90_us"] = t.p90 * 1e6;
    row["calls"] = t.calls;
    row["speedup_vs_f32"] = t.median > 0 ? f32_median / t.median : 0.0;
    row["limit_us"] = limit * 1e6;
    row["time_over_limit"] = limit > 0 ? t.median / limit : 0.0;
  }
  return {{"rounds", rounds},
          {"stream_gbps_median", bw / 1e9},
          {"stream_gbps_min", *std::min_element(bandwidth.begin(), bandwidth.end()) / 1e9},
          {"stream_gbps_max", *std::max_element(bandwidth.begin(), bandwidth.end()) / 1e9},
          {"formats", rows}};
}

void print_weight_formats(const nlohmann::json& j) {
  std::printf("\nweight formats side by side: %d interleaved rounds, the stream bandwidth measured in each (median %.1f GB/s, %.1f-%.1f)\n",
              j.at("rounds").get<int>(), j.at("stream_gbps_median").get<double>(), j.at("stream_gbps_min").get<double>(),
              j.at("stream_gbps_max").get<double>());
  std::printf("%-8s %9s %10s %10s %7s %10s %10s | %11s %11s %10s %12s\n", "weights", "MB", "median us", "p90 us", "vs f32",
              "limit us", "time/limit", "max rel err", "mean rel", "min cosine", "kernels err");
  for (const auto& r : j.at("formats"))
    std::printf("%-8s %9.1f %10.1f %10.1f %6.2fx %10.1f %9.2fx | %11.2e %11.2e %10.6f %12.2e\n", r.at("weights").get<std::string>().c_str(),
                r.at("weight_mb").get<double>(), r.at("median_us").get<double>(), r.at("p90_us").get<double>(),
                r.at("speedup_vs_f32").get<double>(), r.at("limit_us").get<double>(), r.at("time_over_limit").get<double>(),
                r.at("max_rel_err").get<double>(), r.at("mean_rel_err").get<double>(), r.at("min_cosine").get<double>(),
                r.at("kernels_vs_reference").get<double>());
  std::printf("(limit: the weight bytes over the bandwidth, or the FLOPs over the sgemm peak where larger; errors: the first output against the f32 interpreter, relative to its\n"
              " largest and mean magnitude, and the least cosine of a row; kernels err: against the interpreter on the converted weights)\n");
}

nlohmann::json model_accuracy(const ModelSpec& trace, const std::vector<DType>& formats, int steps) {
  const auto& cfg = models::llama_config(trace.config);
  const int64_t layers = trace.layers ? trace.layers : cfg.n_layers, prompt = 16, S = prompt + steps;
  Graph prefill = models::trace_llama(cfg, {1, prompt, S, DType::f32}, layers);
  Graph decode = models::trace_llama(cfg, {1, 1, S, DType::f32}, layers);
  Graph whole = models::trace_llama(cfg, {1, S, S, DType::f32}, layers);

  RandomInputOptions ro;
  ro.seed = 42;
  Bindings all = random_inputs(prefill, ro);
  all["rope_cos"] = models::rope_table_array(cfg, false, DType::f32);
  all["rope_sin"] = models::rope_table_array(cfg, true, DType::f32);
  Bindings weights, state;
  for (auto& [k, v] : all) (prefill.node(prefill.find(k)).op == Op::param ? weights : state)[k] = std::move(v);
  auto zero_caches = [&](Bindings& b) {
    for (int64_t l = 0; l < layers; ++l)
      for (const char* c : {"k_cache.", "v_cache."}) b[c + std::to_string(l)] = NDArray(DType::f32, {1, cfg.n_kv_heads, S, cfg.head_dim});
    b["pos"] = NDArray::scalar(DType::i64, 0);
  };
  zero_caches(state);
  std::vector<int64_t> prompt_tokens;
  for (int64_t i = 0; i < prompt; ++i) prompt_tokens.push_back(static_cast<int64_t>(state.at("tokens").get(i)));

  nlohmann::json rows = nlohmann::json::array();
  std::vector<int64_t> f32_tokens;
  std::optional<NDArray> f32_logits;
  for (DType f : formats) {
    Executable p = compile_as(prefill, weights, f), d = compile_as(decode, weights, f), w = compile_as(whole, weights, f);
    // Greedy: each format follows its own tokens.
    Bindings in = state;
    std::vector<NDArray> out;
    p.run(in, out);
    std::vector<int64_t> tokens = {argmax_row(out[0], prompt - 1)};
    for (int64_t step = 1; step < steps; ++step) {
      in["tokens"] = NDArray::from(DType::i64, {1, 1}, {static_cast<double>(tokens.back())});
      in["pos"] = NDArray::scalar(DType::i64, static_cast<double>(prompt + step - 1));
      for (int64_t l = 0; l < layers; ++l) {
        in["k_cache." + std::to_string(l)] = out[static_cast<size_t>(1 + 2 * l)];
        in["v_cache." + std::to_string(l)] = out[static_cast<size_t>(2 + 2 * l)];
      }
      d.run(in, out);
      tokens.push_back(argmax_row(out[0], 0));
    }
    if (f32_tokens.empty()) f32_tokens = tokens;  // f32 comes first
    // The fixed sequence: the prompt and f32's continuation, in one prefill.
    std::vector<int64_t> seq = prompt_tokens;
    seq.insert(seq.end(), f32_tokens.begin(), f32_tokens.end());
    seq.resize(static_cast<size_t>(S));
    Bindings win;
    zero_caches(win);
    std::vector<double> ids(seq.begin(), seq.end());
    win["tokens"] = NDArray::from(DType::i64, {1, S}, ids);
    w.run(win, out);
    if (!f32_logits) f32_logits = out[0];
    Agreement logits = agreement(out[0], *f32_logits);
    int64_t same = 0;
    while (same < steps && tokens[static_cast<size_t>(same)] == f32_tokens[static_cast<size_t>(same)]) ++same;
    rows.push_back({{"weights", format_name(f)},
                    {"tokens", tokens},
                    {"same_tokens", same},
                    {"log_likelihood", mean_log_likelihood(out[0], seq)},
                    {"logits_max_rel_err", logits.max_rel},
                    {"logits_min_cosine", logits.min_cosine}});
  }
  for (auto& r : rows) r["log_likelihood_diff"] = r["log_likelihood"].get<double>() - rows[0]["log_likelihood"].get<double>();
  return {{"config", trace.config}, {"layers", layers}, {"prompt", prompt}, {"steps", steps}, {"formats", rows}};
}

void print_model_accuracy(const nlohmann::json& j) {
  const int steps = j.at("steps").get<int>();
  std::printf("\nthe whole model (%s, %lld layers, seeded weights): %d greedy tokens after a %lld-token prompt, each format following its own;\n"
              "log-likelihood per token of the prompt and f32's continuation (one prefill)\n",
              j.at("config").get<std::string>().c_str(), (long long)j.at("layers").get<int64_t>(), steps,
              (long long)j.at("prompt").get<int64_t>());
  std::printf("%-8s %18s %14s %12s %13s %12s\n", "weights", "same as f32", "log-lik/token", "diff", "logits max rel", "min cosine");
  for (const auto& r : j.at("formats")) {
    const int64_t s = r.at("same_tokens").get<int64_t>();
    const std::string same = s == steps ? "all " + std::to_string(steps) : "first " + std::to_string(s) + " of " + std::to_string(steps);
    std::printf("%-8s %18s %14.5f %+12.2e %13.2e %12.6f\n", r.at("weights").get<std::string>().c_str(), same.c_str(),
                r.at("log_likelihood").get<double>(), r.at("log_likelihood_diff").get<double>(), r.at("logits_max_rel_err").get<double>(),
                r.at("logits_min_cosine").get<double>());
  }
}

}  // namespace tj::bench
