#include "bench/train_demo.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "compiler/compile.h"
#include "models/llama.h"
#include "reference/random_inputs.h"
#include "support/files.h"
#include "support/timing.h"
#include "tensorjit/error.h"
#include "train/curve_svg.h"
#include "train/trainer.h"

namespace tj::bench {

namespace {

std::string read_corpus(const TrainOptions& a, std::vector<std::string>* used) {
  std::vector<std::string> files = a.text;
  if (files.empty()) {
    namespace fs = std::filesystem;
    if (fs::exists("README.md")) files.push_back("README.md");
    std::vector<std::string> docs;
    std::error_code ec;
    if (fs::is_directory("docs", ec))
      for (const auto& e : fs::directory_iterator("docs", ec))
        if (e.path().extension() == ".md") docs.push_back(e.path().string());
    std::sort(docs.begin(), docs.end());
    files.insert(files.end(), docs.begin(), docs.end());
    if (files.empty()) throw Error("train: no text: give --text FILE (or run in the tensorjit folder, whose README.md and docs/*.md are the default)");
  }
  std::string text;
  for (const std::string& f : files) {
    bool ok = false;
    std::string t = read_file(f, &ok);
    if (!ok) throw Error("train: cannot read '" + f + "'");
    text += t;
    used->push_back(f);
  }
  if (static_cast<int64_t>(text.size()) < a.seq + 2)
    throw Error("train: " + std::to_string(text.size()) + " bytes of text is shorter than a sequence (" + std::to_string(a.seq + 1) + ")");
  return text;
}

// Linear warmup, then a cosine down to a tenth.
double lr_at(const TrainOptions& a, int64_t step) {
  if (step < a.warmup) return a.lr * static_cast<double>(step + 1) / static_cast<double>(a.warmup);
  double f = static_cast<double>(step - a.warmup) / static_cast<double>(std::max<int64_t>(1, a.steps - a.warmup));
  return a.lr * (0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * f)));
}

std::string printable(const std::string& s) {
  std::string r;
  for (unsigned char c : s) r += (c == '\n' || (c >= 32 && c < 127)) ? static_cast<char>(c) : '?';
  return r;
}

// The model's inputs for `batch` sequences of `seq` tokens: the tokens
// (filled per step), pos 0, and each layer's caches, made once: the
// layer's kv_write covers every row of them on every call.
Bindings sequence_inputs(const models::LlamaConfig& c, int64_t layers, int64_t batch, int64_t seq) {
  Bindings in = {{"tokens", NDArray(DType::i64, {batch, seq})}, {"pos", NDArray::scalar(DType::i64, 0)}};
  for (int64_t l = 0; l < layers; ++l)
    for (const char* kv : {"k_cache.", "v_cache."}) in[kv + std::to_string(l)] = NDArray(DType::f32, {batch, c.n_kv_heads, seq, c.head_dim});
  return in;
}

}  // namespace

void run_train_demo(const TrainOptions& a) {
  const models::LlamaConfig& c = models::llama_config("tiny");
  std::vector<std::string> files;
  const std::string text = read_corpus(a, &files);
  const int64_t B = a.batch, T = a.seq;
  if (T + 1 > c.max_pos) throw Error("train: --seq must be below " + std::to_string(c.max_pos));

  Graph loss = models::trace_llama_loss(c, {B, T, T, DType::f32}, a.layers);
  RandomInputOptions ro;
  ro.seed = a.seed;
  Bindings init = random_inputs(loss, ro), params;
  for (ValueId p : loss.params()) params[loss.node(p).name] = init.at(loss.node(p).name);
  params["rope_cos"] = models::rope_table_array(c, false, DType::f32);
  params["rope_sin"] = models::rope_table_array(c, true, DType::f32);
  int64_t n_params = 0;
  for (const auto& [k, v] : params)
    if (k.rfind("rope_", 0) != 0) n_params += v.numel();

  std::fprintf(stderr, "tjc train: tiny Llama, %lld layers, %lld params, batch %lld x %lld tokens, %zu bytes of text from %zu files\n",
               (long long)a.layers, (long long)n_params, (long long)B, (long long)T, text.size(), files.size());
  auto t0 = Clock::now();
  Trainer trainer(loss, params);
  const double compile_s = seconds_since(t0);
  const CompileStats& st = trainer.executable().stats();
  std::fprintf(stderr, "compiled the step (forward, backward, AdamW: %zu kernels) in %.2f s; arena %.1f MiB; params and state %.1f MiB, %.0f%% updated in place\n",
               st.kernels, compile_s, static_cast<double>(st.arena_bytes) / (1 << 20), static_cast<double>(trainer.state_bytes()) / (1 << 20),
               100.0 * static_cast<double>(trainer.in_place_bytes()) / static_cast<double>(std::max<int64_t>(1, trainer.state_bytes())));

  Rng rng(a.seed + 1);
  Bindings batch = sequence_inputs(c, a.layers, B, T);
  batch["targets"] = NDArray(DType::i64, {B, T});
  std::vector<double> losses, step_seconds;
  const int64_t every = std::max<int64_t>(1, a.steps / 12);
  double train_s = 0, interval_s = 0;
  for (int64_t s = 0; s < a.steps; ++s) {
    NDArray &tokens = batch.at("tokens"), &targets = batch.at("targets");
    for (int64_t b = 0; b < B; ++b) {
      auto at = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(static_cast<int64_t>(text.size()) - T - 1));
      for (int64_t j = 0; j < T; ++j) {
        tokens.set(b * T + j, static_cast<unsigned char>(text[static_cast<size_t>(at + j)]));
        targets.set(b * T + j, static_cast<unsigned char>(text[static_cast<size_t>(at + j + 1)]));
      }
    }
    auto ts = Clock::now();
    losses.push_back(trainer.step(batch, lr_at(a, s)));
    double dt = seconds_since(ts);
    step_seconds.push_back(dt);
    train_s += dt, interval_s += dt;
    if ((s + 1) % every == 0 || s + 1 == a.steps) {
      std::fprintf(stderr, "step %5lld/%lld  loss %.4f  lr %.2e  %.0f tokens/s\n", (long long)(s + 1), (long long)a.steps, losses.back(),
                   lr_at(a, s), static_cast<double>(B * T * every) / interval_s);
      interval_s = 0;
    }
  }
  size_t tail = std::min<size_t>(10, losses.size());
  double final_loss = 0;
  for (size_t i = losses.size() - tail; i < losses.size(); ++i) final_loss += losses[i] / static_cast<double>(tail);
  const double tokens_per_s = static_cast<double>(B * T * a.steps) / train_s;
  if (!a.svg.empty()) {
    write_atomic(a.svg, loss_curve_svg(losses, "tjc train: tiny Llama, " + std::to_string(a.layers) + " layers, batch " + std::to_string(B) +
                                                   " x " + std::to_string(T)));
    std::fprintf(stderr, "loss curve: %s\n", a.svg.c_str());
  }

  // Sampling: the model's forward (one sequence) with the trained weights frozen.
  Graph fwd = models::trace_llama(c, {1, T, T, DType::f32}, a.layers);
  Bindings weights = trainer.params();
  weights["rope_cos"] = params.at("rope_cos"), weights["rope_sin"] = params.at("rope_sin");
  Executable model = tj::compile(fwd, weights);
  std::string out = a.prompt;
  std::vector<NDArray> logits;
  Bindings in = sequence_inputs(c, a.layers, 1, T);
  for (int64_t k = 0; k < a.sample; ++k) {
    std::string window = out.size() >= static_cast<size_t>(T) ? out.substr(out.size() - static_cast<size_t>(T))
                                                               : std::string(static_cast<size_t>(T) - out.size(), ' ') + out;
    for (int64_t j = 0; j < T; ++j) in.at("tokens").set(j, static_cast<unsigned char>(window[static_cast<size_t>(j)]));
    model.run(in, logits);
    const NDArray& z = logits[0];
    const int64_t base = (T - 1) * c.vocab;
    double top = -INFINITY;
    for (int64_t v = 0; v < c.vocab; ++v) top = std::max(top, z.get(base + v));
    std::vector<double> p(static_cast<size_t>(c.vocab));
    double total = 0;
    for (int64_t v = 0; v < c.vocab; ++v) total += p[static_cast<size_t>(v)] = std::exp((z.get(base + v) - top) / a.temperature);
    double r = rng.uniform() * total;
    int64_t pick = 0;
    while (pick + 1 < c.vocab && (r -= p[static_cast<size_t>(pick)]) > 0) ++pick;
    out += static_cast<char>(pick);
  }

  if (a.json) {
    nlohmann::json j = {{"layers", a.layers}, {"params", n_params}, {"batch", B}, {"seq", T}, {"steps", a.steps},
                        {"compile_s", compile_s}, {"arena_bytes", st.arena_bytes},
                        {"state_bytes", trainer.state_bytes()}, {"in_place_bytes", trainer.in_place_bytes()}, {"tokens_per_s", tokens_per_s}, {"first_loss", losses.front()},
                        {"final_loss", final_loss}, {"loss", losses}, {"step_seconds", step_seconds}, {"sample", printable(out)}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("loss %.4f -> %.4f (mean of the last %zu steps; ln 256 = %.4f), %.0f tokens/s, compile %.2f s\n", losses.front(), final_loss,
                tail, std::log(256.0), tokens_per_s, compile_s);
    std::printf("sample (temperature %.2f):\n%s\n", a.temperature, printable(out).c_str());
  }
}

}  // namespace tj::bench
