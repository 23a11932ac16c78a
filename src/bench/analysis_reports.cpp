#include "bench/analysis_reports.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <memory>

#include "bench/args.h"
#include "compiler/analysis.h"
#include "ir/text.h"
#include "memory/svg.h"
#include "passes/pipeline.h"
#include "runtime/gemm.h"
#include "schedule/dot.h"
#include "tensorjit/error.h"
#include "tune/calibrate.h"

namespace tj::bench {
using nlohmann::json;

namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f || !(f << text) || (f.close(), !f)) throw Error("cannot write '" + path + "'");
}

std::string ops_str(const Graph& g, const Kernel& k) {
  std::string s;
  for (ValueId v : k.ops) s += (s.empty() ? "" : " ") + std::string(g.node(v).def().name);
  return s;
}

// ---- kernels ----------------------------------------------------------------

// Byte, flop and memory figures are per size: a graph with size symbols is
// refused with the options that bind them.
void require_concrete(const Graph& g, const char* cmd) {
  auto syms = size_symbols(g);
  if (syms.empty()) return;
  std::string list;
  for (const auto& x : syms) list += (list.empty() ? "" : ", ") + x;
  throw Error(std::string(cmd) + " counts bytes and flops at concrete sizes; the graph has symbolic sizes (" + list +
              "): give them values (--tokens N, --kv-len N, or an IR file with concrete shapes)");
}

}  // namespace

void kernels_report(const KernelsOptions& a) {
  Graph traced = trace_model(a.spec);
  require_concrete(traced, "kernels");
  Variant v = a.eager ? Variant::eager : a.no_flash ? Variant::fused : Variant::fused_flash;
  FusionOptions fo;
  fo.epilogue = !a.no_epilogue;
  fo.pointwise = !a.no_pointwise;
  fo.rowwise = !a.no_rowwise;
  fo.horizontal = a.horizontal;
  if (a.no_fuse || a.eager) fo = FusionOptions::none();
  Compilation c = variant_stages(traced, v, Stage::fusion, false, fo);
  const Graph& g = c.graph;
  const Schedule& s = c.schedule;
  if (!a.dot.empty()) write_file(a.dot, schedule_dot(g, s));
  if (a.json) {
    json j = {{"variant", variant_name(v)}, {"kernels", json::array()}};
    for (const Kernel& k : s.kernels) {
      json ops = json::array();
      for (ValueId op : k.ops) ops.push_back(g.node(op).def().name);
      j["kernels"].push_back({{"kind", kernel_kind_name(k.kind)}, {"ops", ops}, {"space", shape_str(k.space)},
                              {"bytes_read", k.bytes_read}, {"bytes_written", k.bytes_written}, {"flops", k.flops}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("%4s %-10s %-22s %14s %14s %16s  %s\n", "#", "kind", "space", "bytes_read", "bytes_written", "flops", "ops");
  int64_t br = 0, bw = 0, fl = 0;
  for (size_t i = 0; i < s.kernels.size(); ++i) {
    const Kernel& k = s.kernels[i];
    std::printf("%4zu %-10s %-22s %14lld %14lld %16lld  %s\n", i, std::string(kernel_kind_name(k.kind)).c_str(),
                shape_str(k.space).c_str(), (long long)k.bytes_read, (long long)k.bytes_written, (long long)k.flops,
                ops_str(g, k).c_str());
    br += k.bytes_read;
    bw += k.bytes_written;
    fl += k.flops;
  }
  std::printf("%zu kernels, %lld bytes read, %lld bytes written, %lld flops\n", s.kernels.size(), (long long)br, (long long)bw,
              (long long)fl);
}

namespace {

// ---- analyze ----------------------------------------------------------------

std::string gb(int64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(b) / 1e9);
  return buf;
}

}  // namespace

void analyze_report(const AnalyzeOptions& a) {
  HardwareProfile hw = hardware_profile(a.hardware);
  Graph traced = trace_model(a.spec);
  require_concrete(traced, "analyze");
  DType dt = dtype_arg(a.spec.dtype);
  std::vector<VariantReport> rows;
  for (Variant v : all_variants()) rows.push_back(analyze_variant(traced, v, dt, hw));
  MemoryAccount m = memory_account(traced);
  if (a.json) {
    json j = {{"model", a.spec.model}, {"config", a.spec.config}, {"mode", a.spec.mode}, {"dtype", a.spec.dtype},
              {"hardware", hw.name}, {"hardware_source", hw.source}, {"variants", json::array()}};
    for (const auto& r : rows)
      j["variants"].push_back({{"name", variant_name(r.variant)}, {"kernels", r.cost.kernels}, {"bytes", r.cost.bytes},
                               {"flops", r.cost.flops}, {"time_s", r.cost.seconds}});
    j["layer"] = {{"weight_bytes", m.weight_bytes}, {"rope_table_bytes", m.table_bytes}, {"kv_cache_bytes", m.kv_cache_bytes},
                  {"peak_activation_bytes", m.peak_activation_bytes}, {"lower_bound_bytes", m.lower_bound_bytes},
                  {"no_reuse_bytes", m.no_reuse_bytes}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("%s %s %s, %s on %s (%s)\n", a.spec.model.c_str(), a.spec.config.c_str(), a.spec.mode.c_str(),
              a.spec.dtype.c_str(), hw.name.c_str(), hw.source.c_str());
  std::printf("%-12s %8s %12s %14s %12s %10s\n", "variant", "kernels", "GB r+w", "GFLOP", "time (us)", "vs eager");
  for (const auto& r : rows)
    std::printf("%-12s %8lld %12s %14.2f %12.1f %9.2fx\n", std::string(variant_name(r.variant)).c_str(),
                (long long)r.cost.kernels, gb(r.cost.bytes).c_str(), static_cast<double>(r.cost.flops) / 1e9,
                r.cost.seconds * 1e6, rows[0].cost.seconds / r.cost.seconds);
  std::printf("\nper layer: weights %s GB, RoPE tables %s GB, KV cache %s GB\n", gb(m.weight_bytes).c_str(),
              gb(m.table_bytes).c_str(), gb(m.kv_cache_bytes).c_str());
  std::printf("activations (fused+flash, reordered): planned peak %.3f MB, lower bound %.3f MB, without reuse %.3f MB\n",
              m.peak_activation_bytes / 1e6, m.lower_bound_bytes / 1e6, m.no_reuse_bytes / 1e6);
}

namespace {

// ---- memplan ----------------------------------------------------------------

}  // namespace

void memplan_report(const MemplanOptions& a) {
  Graph traced = trace_model(a.spec);
  require_concrete(traced, "memplan");
  Variant v = a.no_flash ? Variant::fused : Variant::fused_flash;
  Compilation fused = variant_stages(traced, v, Stage::fusion, false);
  const Graph& g = fused.graph;
  const Schedule& original = fused.schedule;
  const Schedule s = a.no_reorder ? original : variant_stages(traced, v, Stage::reorder, true).schedule;
  ActivationPlan p = plan_activations(g, s, !a.no_in_place);
  ActivationPlan before = plan_activations(g, original, !a.no_in_place);
  if (!a.svg.empty()) write_file(a.svg, memory_plan_svg(g, p, g.name() + " (" + std::string(variant_name(v)) + ")"));

  // Peak activations against prefill length, with and without flash_attn.
  struct SweepRow {
    int64_t tokens, flash_peak, flash_bound, plain_peak, plain_bound;
  };
  std::vector<SweepRow> sweep;
  bool llama = a.spec.model == "llama-layer" || a.spec.model == "llama";
  if (a.sweep && llama && a.spec.mode == "prefill") {
    for (int64_t t = 512; t <= 32768; t *= 2) {
      ModelSpec ta = a.spec;
      ta.tokens = std::to_string(t);
      ta.kv_len.clear();
      Graph tg = trace_model(ta);
      MemoryAccount f = memory_account(tg, Variant::fused_flash), u = memory_account(tg, Variant::fused);
      sweep.push_back({t, f.peak_activation_bytes, f.lower_bound_bytes, u.peak_activation_bytes, u.lower_bound_bytes});
    }
  }

  if (a.json) {
    json j = {{"variant", variant_name(v)}, {"buffers", json::array()}, {"peak_bytes", p.plan.peak_bytes},
              {"lower_bound_bytes", p.plan.lower_bound_bytes}, {"no_reuse_bytes", p.plan.no_reuse_bytes},
              {"in_place", p.in_place}, {"reordered", !a.no_reorder}, {"peak_bytes_original_order", before.plan.peak_bytes}};
    for (const auto& b : p.buffers)
      j["buffers"].push_back({{"value", b.value}, {"type", g.type(b.value).str()}, {"size", b.size}, {"first", b.first},
                              {"last", b.last}, {"offset", p.plan.offsets[static_cast<size_t>(b.slot)]}, {"slot", b.slot}});
    if (!sweep.empty()) {
      j["sweep"] = json::array();
      for (const auto& r : sweep)
        j["sweep"].push_back({{"tokens", r.tokens}, {"flash_peak_bytes", r.flash_peak}, {"flash_lower_bound_bytes", r.flash_bound},
                              {"unfused_attention_peak_bytes", r.plain_peak}, {"unfused_attention_lower_bound_bytes", r.plain_bound}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("%6s %-22s %14s %6s %6s %14s\n", "value", "type", "size", "first", "last", "offset");
  for (const auto& b : p.buffers)
    std::printf("%%%-5d %-22s %14lld %6d %6d %14lld\n", b.value, g.type(b.value).str().c_str(), (long long)b.size, b.first,
                b.last, (long long)p.plan.offsets[static_cast<size_t>(b.slot)]);
  std::printf("%zu buffers in %zu slots (%d in place), %zu kernels\n", p.buffers.size(), p.slots.size(), p.in_place,
              s.kernels.size());
  std::printf("planned peak %lld bytes, lower bound %lld, no reuse %lld", (long long)p.plan.peak_bytes,
              (long long)p.plan.lower_bound_bytes, (long long)p.plan.no_reuse_bytes);
  if (!a.no_reorder) std::printf(" (original kernel order: peak %lld)", (long long)before.plan.peak_bytes);
  std::printf("\n");
  if (!sweep.empty()) {
    std::printf("\npeak activation memory against prefill tokens (planned / lower bound, MB):\n");
    std::printf("%8s %22s %22s\n", "tokens", "flash_attn", "unfused attention");
    for (const auto& r : sweep)
      std::printf("%8lld %10.1f / %9.1f %10.1f / %9.1f\n", (long long)r.tokens, r.flash_peak / 1e6, r.flash_bound / 1e6,
                  r.plain_peak / 1e6, r.plain_bound / 1e6);
  }
}

}  // namespace tj::bench
