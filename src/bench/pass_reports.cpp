#include "bench/pass_reports.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
#include <sstream>

#include "bench/args.h"
#include "ir/text.h"
#include "passes/pipeline.h"
#include "reference/random_inputs.h"
#include "tensorjit/compile.h"
#include "tensorjit/error.h"

namespace tj::bench {

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) r.push_back(item);
  return r;
}

}  // namespace

void run_opt(const OptOptions& a) {
  Graph g = load_graph(a.file);
  PipelineOptions o;
  o.log = a.log;
  o.pass.weights = weights_format(a.weights);
  Bindings frozen;
  if (a.freeze) {
    // IR text carries no weights: freezing uses seeded random values.
    Bindings all = random_inputs(g, a.seed);
    for (ValueId p : g.params()) frozen.emplace(g.node(p).name, std::move(all.at(g.node(p).name)));
    o.pass.freeze_values = &frozen;
  }
  std::vector<std::string> passes = a.passes.empty() ? default_pipeline(a.freeze) : split_list(a.passes);
  for (const auto& p : passes) find_pass(p);  // reject unknown names before doing any work
  run_pipeline(g, passes, o);
  std::string text = print_graph(g);
  std::fwrite(text.data(), 1, text.size(), stdout);
}

namespace {

nlohmann::json counts_json(const NodeCounts& c) {
  return {{"matmul", c.matmul},       {"elementwise", c.elementwise}, {"reduction", c.reduction},
          {"view", c.view},           {"movement", c.movement},       {"constant", c.constant},
          {"composite", c.composite}, {"special", c.special},         {"flash_attn", c.flash_attn},
          {"ops", c.total_ops}};
}

std::string delta(const NodeCounts& a, const NodeCounts& b) {
  std::string s;
  auto add = [&](const char* name, int64_t x, int64_t y) {
    if (x == y) return;
    s += (s.empty() ? "" : ", ") + std::string(name) + (y > x ? " +" : " ") + std::to_string(y - x);
  };
  add("matmul", a.matmul, b.matmul);
  add("elementwise", a.elementwise, b.elementwise);
  add("reduction", a.reduction, b.reduction);
  add("view", a.view, b.view);
  add("movement", a.movement, b.movement);
  add("const", a.constant, b.constant);
  add("composite", a.composite, b.composite);
  add("special", a.special, b.special);
  add("flash_attn", a.flash_attn, b.flash_attn);
  return s.empty() ? "rewritten, same counts" : s;
}

}  // namespace

void passes_report(const PassesOptions& a) {
  Graph g = trace_model(a.spec);
  // The differential check needs concrete shapes and weights that fit in memory.
  int64_t elems = 0;
  bool concrete = true;
  for (const Node& n : g.nodes()) {
    if (n.op != Op::input && n.op != Op::param) continue;
    auto c = numel_const(n.type.shape);
    if (c) elems += *c;
    else concrete = false;
  }
  bool runnable = concrete && elems <= (int64_t{1} << 26);
  Bindings inputs;
  if (runnable) {
    RandomInputOptions ro;
    ro.seed = a.seed;
    inputs = random_inputs(g, ro);
  }
  PipelineOptions o;
  o.pass.weights = weights_format(a.spec.weights);
  o.differential = runnable;
  o.inputs = &inputs;
  if (a.freeze) {
    if (!runnable) throw Error("--freeze needs a model whose weights fit in memory");
    o.pass.freeze_values = &inputs;
  }
  NodeCounts before = count_nodes(g);
  auto records = run_pipeline(g, default_pipeline(a.freeze), o);

  if (a.json) {
    nlohmann::json j;
    j["model"] = a.spec.model;
    j["config"] = a.spec.config;
    j["mode"] = a.spec.mode;
    j["differential"] = runnable;
    j["input"] = counts_json(before);
    j["passes"] = nlohmann::json::array();
    NodeCounts prev = before;
    for (const auto& r : records) {
      nlohmann::json row = {{"pass", r.pass}, {"changed", r.changed}, {"seconds", r.seconds},
                            {"counts", counts_json(r.counts)}, {"delta", delta(prev, r.counts)}};
      if (runnable) {
        row["max_abs_diff"] = r.max_abs_diff;
        row["max_rel_diff"] = r.max_rel_diff;
        row["bit_identical"] = r.bit_identical;
      }
      j["passes"].push_back(row);
      prev = r.counts;
    }
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("%-18s %6s %6s %5s %5s %5s %5s %5s %5s %5s %5s %9s %10s  %s\n", "pass", "ms", "matmul", "elem", "red",
              "view", "move", "const", "comp", "spec", "flash", "max_rel", "bit-exact", "changed");
  auto row = [&](const char* name, double ms, const NodeCounts& c, const std::string& rel, const char* exact,
                 const std::string& what) {
    std::printf("%-18s %6.2f %6lld %5lld %5lld %5lld %5lld %5lld %5lld %5lld %5lld %9s %10s  %s\n", name, ms,
                (long long)c.matmul, (long long)c.elementwise, (long long)c.reduction, (long long)c.view,
                (long long)c.movement, (long long)c.constant, (long long)c.composite, (long long)c.special,
                (long long)c.flash_attn, rel.c_str(), exact, what.c_str());
  };
  row("(traced)", 0, before, "-", "-", "-");
  NodeCounts prev = before;
  for (const auto& r : records) {
    char rel[32] = "-";
    if (runnable) std::snprintf(rel, sizeof rel, "%.2e", r.max_rel_diff);
    row(r.pass.c_str(), r.seconds * 1e3, r.counts, rel, runnable ? (r.bit_identical ? "yes" : "no") : "-",
        r.changed ? delta(prev, r.counts) : "(unchanged)");
    prev = r.counts;
  }
  if (!runnable) std::printf("(shape-only: no differential check for a model this size or with symbolic dims)\n");
}

}  // namespace tj::bench
