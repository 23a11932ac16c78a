// Whole-model analysis, shape-only: the four execution variants compared in
// `tjc analyze`, each a pass pipeline plus fusion rules, and the per-layer
// memory account.
//
//   eager        composites as hand-written kernels, nothing fused
//   unfused      decomposed into primitives, nothing fused
//   fused        decomposed, fused (attention as matmuls and a softmax)
//   fused+flash  attention matched to flash_attn, decomposed, fused
//
// Without weights there is no freezing, so fold_norm_weights (which would
// scale weights at run time) is left out of every variant.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/driver.h"
#include "cost/roofline.h"
#include "memory/lifetimes.h"
#include "schedule/fusion.h"

namespace tj {

enum class Variant { eager, unfused, fused, fused_flash };
std::string_view variant_name(Variant v);
const std::vector<Variant>& all_variants();

// The passes a variant runs, in order.
std::vector<std::string> variant_passes(Variant v);
FusionOptions variant_fusion(Variant v);
Graph prepare_variant(const Graph& traced, Variant v);

// The compiler's stages (compiler/driver.h) up to `last`, for a report:
// no program cache, on the CPU, with `o`'s passes (empty: the default
// pipeline), fusion rules and reordering; nothing generated before emit.
Compilation analysis_stages(const Graph& traced, CompileOptions o, Stage last);
// The same with variant v's passes and fusion rules (or `fusion`).
Compilation variant_stages(const Graph& traced, Variant v, Stage last, bool reorder, std::optional<FusionOptions> fusion = std::nullopt);

struct VariantReport {
  Variant variant;
  Schedule schedule;
  ScheduleCost cost;
};
VariantReport analyze_variant(const Graph& traced, Variant v, DType dtype, const HardwareProfile& hw);

struct MemoryAccount {
  int64_t weight_bytes = 0;      // params, except the RoPE tables
  int64_t table_bytes = 0;       // RoPE tables
  int64_t kv_cache_bytes = 0;    // the k/v cache inputs
  int64_t peak_activation_bytes = 0;  // planned arena (reordered, in place)
  int64_t lower_bound_bytes = 0;
  int64_t no_reuse_bytes = 0;
};
// Plans the fused+flash variant (or `v`) after reordering.
MemoryAccount memory_account(const Graph& traced, Variant v = Variant::fused_flash);

}  // namespace tj
