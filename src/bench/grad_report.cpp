#include "bench/grad_report.h"

#include <nlohmann/json.hpp>

#include <cstdio>

#include "autodiff/partition.h"
#include "bench/args.h"
#include "compiler/analysis.h"
#include "ir/text.h"
#include "tensorjit/error.h"

namespace tj::bench {

void grad_report(const GradOptions& a) {
  Graph g = trace_model(a.spec);
  VjpSpec spec;
  spec.outputs = {0};
  spec.wrt = a.wrt;
  if (spec.wrt.empty())  // every float param but the RoPE tables (constants of the model)
    for (ValueId p : g.params())
      if (is_float(g.type(p).dtype) && g.node(p).name.rfind("rope_", 0) != 0) spec.wrt.push_back(g.node(p).name);
  if (spec.wrt.empty()) throw Error("grad: " + g.name() + " has no floating-point param (name inputs with --wrt)");
  Vjp v = vjp(g, spec);
  Partition p = partition(g, v);
  const double pct = 100.0 * static_cast<double>(p.saved_bytes) / static_cast<double>(std::max<int64_t>(1, p.every_forward_value_bytes));

  // Per kernel of the partitioned forward: every value it computes, and
  // what of it is saved.
  CompileOptions fusing;
  fusing.passes = {"dce"};  // the partitioned forward as it is
  const Schedule s = analysis_stages(p.forward, fusing, Stage::fusion).schedule;
  std::vector<bool> saved(p.forward.size(), false);
  for (size_t k = g.outputs().size(); k < p.forward.outputs().size(); ++k) saved[static_cast<size_t>(p.forward.outputs()[k])] = true;
  const SymEnv hint = size_hint(p.forward, {});
  auto bytes = [&](ValueId x) { return numel(p.forward.type(x).shape).eval(hint) * static_cast<int64_t>(dtype_size(p.forward.type(x).dtype)); };
  struct Row {
    std::string kind, ops;
    int64_t all = 0, kept = 0;
  };
  std::vector<Row> rows;
  for (const Kernel& k : s.kernels) {
    Row r{std::string(kernel_kind_name(k.kind)), "", 0, 0};
    for (ValueId x : k.ops) {
      r.ops += (r.ops.empty() ? "" : " ") + std::string(p.forward.node(x).def().name);
      r.all += bytes(x);
      if (saved[static_cast<size_t>(x)]) r.kept += bytes(x);
    }
    rows.push_back(r);
  }

  if (a.json) {
    nlohmann::json j = {{"model", g.name()}, {"wrt", v.wrt}, {"saved_bytes", p.saved_bytes},
                        {"every_forward_value_bytes", p.every_forward_value_bytes}, {"recomputed", p.recomputed}, {"reused", p.reused}};
    for (const auto& x : p.saved) j["saved"].push_back({{"name", x.name}, {"type", x.type.str()}, {"op", x.op}, {"bytes", x.bytes}});
    for (const Row& r : rows) j["kernels"].push_back({{"kind", r.kind}, {"ops", r.ops}, {"value_bytes", r.all}, {"saved_bytes", r.kept}});
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  if (!a.report) {
    std::printf("// forward: %s's outputs, then the values saved for the backward\n%s\n", g.name().c_str(), print_graph(p.forward, log_print_options()).c_str());
    std::printf("// backward: the gradients of %zu values\n%s", v.wrt.size(), print_graph(p.backward, log_print_options()).c_str());
    return;
  }
  std::printf("%s: gradients of output 0 with respect to %zu values\n", g.name().c_str(), v.wrt.size());
  std::printf("saved for the backward: %zu values, %lld bytes; saving every forward value: %lld bytes (%.1f%%)\n", p.saved.size(),
              (long long)p.saved_bytes, (long long)p.every_forward_value_bytes, pct);
  std::printf("recomputed by the backward: %d values; inputs and params it reads (held by the caller): %zu\n\n", p.recomputed, p.reused.size());
  std::printf("%-10s %-16s %-6s %12s\n", "saved", "type", "op", "bytes");
  for (const auto& x : p.saved) std::printf("%-10s %-16s %-6s %12lld\n", x.name.c_str(), x.type.str().c_str(), x.op.c_str(), (long long)x.bytes);
  std::printf("\n%4s %-10s %12s %12s  %s\n", "#", "kernel", "values B", "saved B", "ops");
  for (size_t k = 0; k < rows.size(); ++k)
    std::printf("%4zu %-10s %12lld %12lld  %s\n", k, rows[k].kind.c_str(), (long long)rows[k].all, (long long)rows[k].kept, rows[k].ops.c_str());
}

}  // namespace tj::bench
