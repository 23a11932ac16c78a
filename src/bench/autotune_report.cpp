#include "bench/autotune_report.h"

#include <cstdio>

#include "compiler/compile.h"
#include "passes/pipeline.h"
#include "support/timing.h"
#include "tensorjit/error.h"

namespace tj::bench {

namespace {

nlohmann::json tuning_json(const CompileStats& s) {
  return {{"tunable_kernels", s.tunable_kernels}, {"from_cache", s.tuned_from_cache}, {"measured", s.tuned_now},
          {"tuning_seconds", s.tuning_seconds},   {"choices", s.tuning_choices}};
}

}  // namespace

nlohmann::json autotune_report(const Graph& graph, const Bindings& params, const Bindings& inputs, const CompileOptions& o, double budget,
                               int rounds) {
  CompileOptions plain = o, tuned = o;
  plain.autotune = false;
  tuned.autotune = true;
  Executable rule = tj::compile(graph, params, plain);
  Executable first = tj::compile(graph, params, tuned);
  Executable again = tj::compile(graph, params, tuned);  // takes the recorded choices
  if (!rule.stats().compiled) throw Error("bench --autotune: no C++ compiler, nothing to tune");
  // Interleaved rounds, each program with its own copy of the inputs.
  RunOptions in_place;
  in_place.copy_donated_outputs = false;
  Bindings in_rule = inputs, in_tuned = inputs;
  std::vector<double> t_rule, t_tuned;
  rounds = std::max(rounds, 1);
  for (int r = 0; r < rounds; ++r) {
    std::vector<NDArray> out;
    auto a = call_seconds([&] { rule.run(in_rule, out, in_place); }, 3, budget / rounds);
    auto b = call_seconds([&] { again.run(in_tuned, out, in_place); }, 3, budget / rounds);
    t_rule.insert(t_rule.end(), a.begin(), a.end());
    t_tuned.insert(t_tuned.end(), b.begin(), b.end());
  }
  // The tuned program against the rules' on the same inputs.
  Bindings x = inputs, y = inputs;
  std::vector<NDArray> want, got;
  rule.run(x, want);
  again.run(y, got);
  Difference d = compare_outputs(got, want);
  Timing tr = summarize(t_rule), tt = summarize(t_tuned);
  return {{"rounds", rounds},
          {"rule_median_us", tr.median * 1e6},
          {"rule_p90_us", tr.p90 * 1e6},
          {"tuned_median_us", tt.median * 1e6},
          {"tuned_p90_us", tt.p90 * 1e6},
          {"speedup", tr.median / tt.median},
          {"max_rel_diff", d.max_rel},
          {"first_compile", tuning_json(first.stats())},
          {"second_compile", tuning_json(again.stats())}};
}

void print_autotune_report(const nlohmann::json& j) {
  const auto &first = j.at("first_compile"), &second = j.at("second_compile");
  std::printf("\nautotuned against the rules' schedules: %d tunable kernels; first compilation: %d measured in %.2f s, %d from the tuning cache; "
              "second: %d measured (%.3f s), %d from the cache\n",
              first.at("tunable_kernels").get<int>(), first.at("measured").get<int>(), first.at("tuning_seconds").get<double>(),
              first.at("from_cache").get<int>(), second.at("measured").get<int>(), second.at("tuning_seconds").get<double>(),
              second.at("from_cache").get<int>());
  std::string choices;
  for (const auto& c : second.at("choices")) choices += (choices.empty() ? "" : "; ") + c.get<std::string>();
  std::printf("choices: %s\n", choices.empty() ? "(none)" : choices.c_str());
  std::printf("%d interleaved rounds: rules %.1f us (p90 %.1f), tuned %.1f us (p90 %.1f): %.2fx; outputs differ by %.2e (max rel)\n",
              j.at("rounds").get<int>(), j.at("rule_median_us").get<double>(), j.at("rule_p90_us").get<double>(),
              j.at("tuned_median_us").get<double>(), j.at("tuned_p90_us").get<double>(), j.at("speedup").get<double>(),
              j.at("max_rel_diff").get<double>());
}

}  // namespace tj::bench
