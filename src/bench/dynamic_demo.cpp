#include "bench/dynamic_demo.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "compiler/compile.h"
#include "models/llama.h"
#include "reference/random_inputs.h"
#include "support/timing.h"
#include "tensorjit/error.h"
#include "tensorjit/jit.h"

namespace tj::bench {

namespace {

constexpr int64_t kMaxSteps = 100000, kMaxFirstKv = 65536;

// The tiny layer's config, with RoPE rows for every position the demo
// reaches; `command` names the subcommand in the error on bad options.
models::LlamaConfig demo_config(const DynamicDemoOptions& a, const std::string& command) {
  if (a.steps < 1 || a.steps > kMaxSteps || a.first < 2 || a.first > kMaxFirstKv)
    throw Error(command + ": --steps must be in 1..100000 and --first-kv in 2..65536");
  models::LlamaConfig c = models::llama_config("tiny");
  c.max_pos = std::max(c.max_pos, a.first + a.steps);
  return c;
}

DynamicPolicy policy_named(const std::string& name) {
  return name == "bucketed"    ? DynamicPolicy::bucketed
         : name == "symbolic"  ? DynamicPolicy::symbolic
         : name == "automatic" ? DynamicPolicy::automatic
                               : DynamicPolicy::static_shapes;
}

// The tiny layer's weights (seeded) and real RoPE tables, by name.
Bindings layer_weights(const models::LlamaConfig& c) {
  Graph g = models::trace_llama_layer(c, {1, 1, 8, DType::f32});
  Bindings all = random_inputs(g, 7), w;
  for (ValueId p : g.params()) w[g.node(p).name] = all.at(g.node(p).name);
  w["rope_cos"] = models::rope_table_array(c, false, DType::f32);
  w["rope_sin"] = models::rope_table_array(c, true, DType::f32);
  return w;
}

JitFn layer_fn(const models::LlamaConfig& c, const Bindings& w) {
  return [&c, &w](JitArgs& a) {
    auto p = [&](const char* n) { return a.param(n, w.at(n)); };
    models::LayerParams lp{p("attn_norm"), p("wq"), p("wk"), p("wv"), p("wo"), p("mlp_norm"), p("w_gate"), p("w_up"), p("w_down")};
    models::RopeTables rt{p("rope_cos"), p("rope_sin")};
    auto o = models::llama_layer(c, lp, rt, a.tensor(0), a.tensor(1), a.tensor(2), a.tensor(3));
    return std::vector<Tensor>{o.y, o.k_cache, o.v_cache};
  };
}

// The cache grown by one (zero) row along the sequence axis.
NDArray grow(const NDArray& cache) {
  auto s = cache.shape();
  NDArray out(cache.dtype(), {s[0], s[1], s[2] + 1, s[3]});
  const float* src = cache.data<float>();
  float* dst = out.data<float>();
  for (int64_t bh = 0; bh < s[0] * s[1]; ++bh)
    std::copy(src + bh * s[2] * s[3], src + (bh + 1) * s[2] * s[3], dst + bh * (s[2] + 1) * s[3]);
  return out;
}

struct DecodeRow {
  std::string policy;
  int64_t compilations = 0, eager = 0;
  double compile_s = 0, wasted = 0, step_us = 0;
  std::vector<double> last_y;
  std::string explanation;
};

DecodeRow decode(const DynamicDemoOptions& a, const models::LlamaConfig& c, const Bindings& w, const std::string& policy) {
  // The caches' sequence axis (tensors 2 and 3, axis 2) under the policy;
  // every other dim static.
  JitOptions o;
  o.policy = DynamicPolicy::static_shapes;
  DynamicPolicy p = policy_named(policy);
  o.dims = {{2, 2, p}, {3, 2, p}};
  JitFunction f = jit("decode_" + policy, layer_fn(c, w), o);
  Rng r(11);
  auto fill = [&](std::vector<int64_t> shape) { return uniform_array(DType::f32, std::move(shape), r); };
  NDArray kc = fill({1, c.n_kv_heads, a.first - 1, c.head_dim}), vc = fill({1, c.n_kv_heads, a.first - 1, c.head_dim});
  DecodeRow row;
  row.policy = policy;
  double padded = 0, real = 0, run_s = 0;
  std::vector<NDArray> out;
  for (int64_t step = 0; step < a.steps; ++step) {
    kc = grow(kc), vc = grow(vc);
    int64_t L = kc.shape()[2];
    std::vector<NDArray> args{fill({1, 1, c.d_model}), NDArray::scalar(DType::i64, static_cast<double>(L - 1)), std::move(kc), std::move(vc)};
    double compile_before = f.stats().compile_seconds;
    auto t0 = Clock::now();
    out = f(std::move(args));  // given up: the updated caches move into the outputs
    run_s += seconds_since(t0) - (f.stats().compile_seconds - compile_before);
    kc = std::move(out[1]), vc = std::move(out[2]);
    real += static_cast<double>(L);
    padded += policy == "bucketed" && L >= 2 ? static_cast<double>(o.buckets.of(L) - L) : 0.0;
  }
  row.compilations = f.stats().compilations;
  row.eager = f.stats().eager_calls;
  row.compile_s = f.stats().compile_seconds;
  row.wasted = padded / (real + padded);
  row.step_us = run_s / static_cast<double>(a.steps) * 1e6;
  row.last_y = out[0].to_vector();
  row.explanation = f.explain();
  return row;
}

// One decode step at a fixed KV length, the caches updated in place: the
// static Executable called directly, and tj::jit under each policy (static,
// symbolic, automatic), side by side in one process. Median per call.
struct FixedStep {
  double executable_us = 0;
  std::vector<std::pair<std::string, double>> jit_us;
};
FixedStep fixed_step(const models::LlamaConfig& c, const Bindings& w, int64_t S) {
  const int calls = 4000;
  Rng r(13);
  NDArray x = uniform_array(DType::f32, {1, 1, c.d_model}, r), kc0 = uniform_array(DType::f32, {1, c.n_kv_heads, S, c.head_dim}, r);
  NDArray pos = NDArray::scalar(DType::i64, static_cast<double>(S - 1));
  FixedStep f;
  {
    Graph g = models::trace_llama_layer(c, {1, 1, S, DType::f32});
    Bindings params, in{{"x", x}, {"pos", pos}, {"k_cache", kc0}, {"v_cache", kc0}};
    for (ValueId v : g.params()) params[g.node(v).name] = w.at(g.node(v).name);
    Executable e = tj::compile(g, params);
    RunOptions ro;
    ro.copy_donated_outputs = false;
    std::vector<NDArray> out;
    f.executable_us = time_calls([&] { e.run(in, out, ro); }, calls, 0).median * 1e6;
  }
  for (const char* policy : {"static", "symbolic", "automatic"}) {
    JitOptions o;
    o.policy = DynamicPolicy::static_shapes;
    DynamicPolicy p = policy_named(policy);
    o.dims = {{2, 2, p}, {3, 2, p}};
    JitFunction fn = jit(std::string("fixed_") + policy, layer_fn(c, w), o);
    NDArray kc = kc0, vc = kc0;
    if (p == DynamicPolicy::automatic) {  // another length first, so that the axis becomes symbolic
      std::vector<NDArray> args{x, pos, grow(kc), grow(vc)};
      fn(args);
    }
    std::vector<double> t;
    for (int i = 0; i < calls + 1; ++i) {  // the first call compiles (or binds): not timed
      std::vector<NDArray> args{x, pos, std::move(kc), std::move(vc)};
      auto t0 = Clock::now();
      auto out = fn(std::move(args));
      if (i > 0) t.push_back(seconds_since(t0));
      kc = std::move(out[1]), vc = std::move(out[2]);
    }
    f.jit_us.emplace_back(policy, quantile(t, 0.5) * 1e6);
  }
  return f;
}

struct LoopResult {
  int64_t graphs = 0, breaks = 0, compiled = 0;
  double us = 0;
  std::vector<double> y;
  std::string explanation;
};

// y <- tanh(y @ W) until max|dy| < 1e-6: with a graph break per iteration
// (item() decides in C++), or as one while_loop the runtime runs.
LoopResult tanh_loop(bool structured) {
  const int64_t n = 64;
  Rng r(5);
  NDArray W = uniform_array(DType::f32, {n, n}, r, 0.15), y0 = uniform_array(DType::f32, {1, n}, r);
  JitFunction f = jit(structured ? "tanh_while_loop" : "tanh_breaks", [&W, structured](JitArgs& a) {
    Tensor y = a.tensor(0), w = a.param("W", W);
    if (structured) {
      Tensor start = a.tracer().scalar(1e30, DType::f32), tol = a.tracer().scalar(1e-6, DType::f32);
      auto out = while_loop([&tol](const std::vector<Tensor>& s) { return ge(s[1], tol); },
                            [&w](const std::vector<Tensor>& s) {
                              Tensor next = tanh(matmul(s[0], w));
                              return std::vector<Tensor>{next, amax(abs(next - s[0]), {0, 1})};
                            },
                            {y, start});
      return std::vector<Tensor>{out[0]};
    }
    for (int i = 0; i < 1000; ++i) {
      Tensor next = tanh(matmul(y, w));
      Tensor delta = amax(abs(next - y), {0, 1});
      y = next;
      if (delta.item() < 1e-6) break;
    }
    return std::vector<Tensor>{y};
  });
  std::vector<NDArray> args{y0};
  f(args);  // compiles
  int64_t graphs0 = f.stats().graphs_run, breaks0 = f.stats().graph_breaks;
  const int reps = 5;
  std::vector<NDArray> out;
  auto call = [&] {
    std::vector<NDArray> in{y0};
    out = f(in);
  };
  double us = time_calls(call, reps, 0).median * 1e6;
  return {(f.stats().graphs_run - graphs0) / reps, (f.stats().graph_breaks - breaks0) / reps, f.stats().compilations, us,
          out[0].to_vector(), f.explain()};
}

struct SymbolicCheck {
  std::vector<int64_t> sizes{2, 7, 64, 500};
  double max_abs_diff = 0;
  int64_t compilations = 0;
};

// The layer traced once with its KV length symbolic and compiled once,
// against one static compilation per size, on the same inputs.
SymbolicCheck symbolic_check(const models::LlamaConfig& c, const Bindings& w) {
  SymbolicCheck r;
  JitOptions sym, st;
  sym.policy = st.policy = DynamicPolicy::static_shapes;
  sym.dims = {{2, 2, DynamicPolicy::symbolic}, {3, 2, DynamicPolicy::symbolic}};
  st.cache_limit = 16;
  JitFunction f = jit("symbolic_check", layer_fn(c, w), sym), s = jit("static_check", layer_fn(c, w), st);
  Rng rng(3);
  auto fill = [&](std::vector<int64_t> shape) { return uniform_array(DType::f32, std::move(shape), rng); };
  for (int64_t S : r.sizes) {
    std::vector<NDArray> args{fill({1, 1, c.d_model}), NDArray::scalar(DType::i64, static_cast<double>(S - 1)),
                              fill({1, c.n_kv_heads, S, c.head_dim}), fill({1, c.n_kv_heads, S, c.head_dim})};
    std::vector<NDArray> copy = args;
    auto got = f(args), want = s(copy);
    for (size_t k = 0; k < got.size(); ++k) {
      auto a = got[k].to_vector(), b = want[k].to_vector();
      if (a.size() != b.size()) throw Error("dynamic-demo: symbolic and static outputs differ in size");
      for (size_t i = 0; i < a.size(); ++i) r.max_abs_diff = std::max(r.max_abs_diff, std::abs(a[i] - b[i]));
    }
  }
  r.compilations = f.stats().compilations;
  return r;
}

double guard_check_ns(const models::LlamaConfig& c, const Bindings& w) {
  JitFunction f = jit("guards", layer_fn(c, w));
  std::vector<NDArray> args{NDArray(DType::f32, {1, 1, c.d_model}), NDArray::scalar(DType::i64, 63),
                            NDArray(DType::f32, {1, c.n_kv_heads, 64, c.head_dim}), NDArray(DType::f32, {1, c.n_kv_heads, 64, c.head_dim})};
  f(args);
  const int n = 1000000;
  int hits = 0;
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) hits += f.would_hit(args);
  double ns = seconds_since(t0) / n * 1e9;
  if (hits != n) throw Error("dynamic-demo: guard check missed");
  return ns;
}

}  // namespace

void run_dynamic_demo(const DynamicDemoOptions& a) {
  models::LlamaConfig c = demo_config(a, "dynamic-demo");
  Bindings w = layer_weights(c);
  std::vector<DecodeRow> rows;
  // Each policy compiles into an empty cache of its own: its compile time is
  // cold, not a hit on what an earlier policy built.
  namespace fs = std::filesystem;
  const char* old = std::getenv("TJ_CACHE_DIR");
  std::string saved = old ? old : "";
  for (const char* p : {"static", "bucketed", "symbolic", "automatic"}) {
    fs::path dir = fs::temp_directory_path() / ("tj_dynamic_" + std::to_string(::getpid()) + "_" + p);
    setenv("TJ_CACHE_DIR", dir.c_str(), 1);
    rows.push_back(decode(a, c, w, p));
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  if (old) setenv("TJ_CACHE_DIR", saved.c_str(), 1);
  else unsetenv("TJ_CACHE_DIR");
  double agree = 0;
  for (const auto& r : rows)
    for (size_t i = 0; i < rows[0].last_y.size(); ++i) agree = std::max(agree, std::abs(rows[0].last_y[i] - r.last_y[i]));
  SymbolicCheck sc = symbolic_check(c, w);
  LoopResult loop = tanh_loop(false), structured = tanh_loop(true);
  double same = 0;
  for (size_t i = 0; i < loop.y.size(); ++i) same = std::max(same, std::abs(loop.y[i] - structured.y[i]));
  double guard_ns = guard_check_ns(c, w);
  FixedStep fixed = fixed_step(c, w, 64);
  if (a.json) {
    nlohmann::json j;
    for (const auto& r : rows)
      j["decode"].push_back({{"policy", r.policy}, {"compilations", r.compilations}, {"interpreter_steps", r.eager},
                             {"compile_s", r.compile_s}, {"wasted_fraction", r.wasted}, {"step_us", r.step_us}});
    j["decode_policies_max_abs_diff"] = agree;
    j["loop"] = {{"graph_break_graphs", loop.graphs}, {"graph_breaks", loop.breaks}, {"graph_break_compiled", loop.compiled},
                 {"graph_break_us", loop.us}, {"while_loop_graphs", structured.graphs}, {"while_loop_us", structured.us},
                 {"max_abs_diff", same}};
    j["guard_check_ns"] = guard_ns;
    j["fixed_step"]["executable_us"] = fixed.executable_us;
    for (const auto& [p, us] : fixed.jit_us) j["fixed_step"]["jit_" + p + "_us"] = us;
    j["symbolic_check"] = {{"sizes", sc.sizes}, {"identical", sc.max_abs_diff == 0}, {"max_abs_diff", sc.max_abs_diff},
                           {"compilations", sc.compilations}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("decode: %lld steps of the tiny layer, KV length %lld -> %lld\n", (long long)a.steps, (long long)a.first,
              (long long)(a.first + a.steps - 1));
  std::printf("  %-10s %13s %12s %10s %10s %9s\n", "policy", "compilations", "interpreted", "compile s", "padded", "us/step");
  for (const auto& r : rows)
    std::printf("  %-10s %13lld %12lld %10.2f %9.1f%% %9.1f\n", r.policy.c_str(), (long long)r.compilations, (long long)r.eager,
                r.compile_s, r.wasted * 100, r.step_us);
  std::printf("  last step's output, every policy against static: max abs diff %.2e\n", agree);
  std::printf("loop: y <- tanh(y @ W) until max|dy| < 1e-6, 64 wide\n");
  std::printf("  graph breaks: %lld graphs per call (%lld breaks), %lld compiled, %.1f us per call\n", (long long)loop.graphs,
              (long long)loop.breaks, (long long)loop.compiled, loop.us);
  std::printf("  while_loop:   %lld graph per call, run by the runtime, %.1f us per call; results differ by %.2e\n",
              (long long)structured.graphs, structured.us, same);
  std::printf("guards: %.0f ns to check a 4-tensor call against the cache\n", guard_ns);
  std::printf("one decode step at KV length 64, caches in place (median of 4000): static executable %.1f us; jit:", fixed.executable_us);
  for (const auto& [p, us] : fixed.jit_us) std::printf(" %s %.1f us (%.2fx)", p.c_str(), us, us / fixed.executable_us);
  std::printf("\n");
  std::printf("symbolic check: the tiny layer with KV length S symbolic, %lld compilation, against a static compilation at S =",
              (long long)sc.compilations);
  for (int64_t S : sc.sizes) std::printf(" %lld", (long long)S);
  std::printf(": %s (max abs diff %.2e)\n", sc.max_abs_diff == 0 ? "identical" : "different", sc.max_abs_diff);
}

// tjc explain: the demo's jitted functions, run briefly, and what each
// compiled, under which guards, and why it recompiled or broke the graph.
void explain_dynamic_demo(const DynamicDemoOptions& a) {
  models::LlamaConfig c = demo_config(a, "explain");
  Bindings w = layer_weights(c);
  for (const char* p : {"static", "bucketed", "symbolic", "automatic"}) std::printf("%s\n", decode(a, c, w, p).explanation.c_str());
  std::printf("%s\n%s", tanh_loop(false).explanation.c_str(), tanh_loop(true).explanation.c_str());
}

}  // namespace tj::bench
