#include "compiler/analysis.h"

#include "compiler/driver.h"

namespace tj {

std::string_view variant_name(Variant v) {
  switch (v) {
    case Variant::eager: return "eager";
    case Variant::unfused: return "unfused";
    case Variant::fused: return "fused";
    case Variant::fused_flash: return "fused+flash";
  }
  return "?";
}

const std::vector<Variant>& all_variants() {
  static const std::vector<Variant> v = {Variant::eager, Variant::unfused, Variant::fused, Variant::fused_flash};
  return v;
}

std::vector<std::string> variant_passes(Variant v) {
  switch (v) {
    case Variant::eager: return {"cse", "simplify", "dce"};
    case Variant::unfused:
    case Variant::fused: return {"cse", "simplify", "decompose", "cse", "simplify", "dce"};
    case Variant::fused_flash: return {"cse", "simplify", "match_attention", "dce", "decompose", "cse", "simplify", "dce"};
  }
  return {};
}

FusionOptions variant_fusion(Variant v) {
  return v == Variant::fused || v == Variant::fused_flash ? FusionOptions{} : FusionOptions::none();
}

Compilation analysis_stages(const Graph& traced, CompileOptions o, Stage last) {
  o.program_cache = false;
  o.device = Device();  // the CPU
  Compilation c;
  run_stages(c, &traced, {}, o, last);
  return c;
}

Compilation variant_stages(const Graph& traced, Variant v, Stage last, bool reorder, std::optional<FusionOptions> fusion) {
  CompileOptions o;
  o.passes = variant_passes(v);
  o.fusion = fusion ? *fusion : variant_fusion(v);
  o.reorder = reorder;
  return analysis_stages(traced, o, last);
}

Graph prepare_variant(const Graph& traced, Variant v) { return std::move(variant_stages(traced, v, Stage::passes, false).graph); }

VariantReport analyze_variant(const Graph& traced, Variant v, DType dtype, const HardwareProfile& hw) {
  VariantReport r{v, std::move(variant_stages(traced, v, Stage::fusion, false).schedule), {}};
  r.cost = schedule_cost(r.schedule, dtype, hw);
  return r;
}

MemoryAccount memory_account(const Graph& traced, Variant v) {
  MemoryAccount a;
  for (const Node& n : traced.nodes()) {
    if (n.op != Op::param && n.op != Op::input) continue;
    int64_t b = numel_const(n.type.shape).value() * dtype_size(n.type.dtype);
    if (n.op == Op::param) (n.name.rfind("rope_", 0) == 0 ? a.table_bytes : a.weight_bytes) += b;
    else if (n.name.find("_cache") != std::string::npos) a.kv_cache_bytes += b;
  }
  Compilation c = variant_stages(traced, v, Stage::reorder, true);
  ActivationPlan p = plan_activations(c.graph, c.schedule);
  a.peak_activation_bytes = p.plan.peak_bytes;
  a.lower_bound_bytes = p.plan.lower_bound_bytes;
  a.no_reuse_bytes = p.plan.no_reuse_bytes;
  return a;
}

}  // namespace tj
