// tjc kernels, analyze, memplan, calibrate: their options; the reports are
// the bench library's (src/bench/analysis_reports.h).
#include <memory>

#include "bench/analysis_reports.h"
#include "runtime/gemm.h"
#include "tjc/common.h"
#include "tune/calibrate.h"

namespace tjc {

using namespace tj;

void add_analysis_commands(CLI::App& app) {
  auto ka = std::make_shared<KernelsOptions>();
  auto* k = app.add_subcommand("kernels", "partition a model into fused kernels and list them");
  add_trace_options(k, ka->spec);
  k->add_flag("--json", ka->json, "JSON output");
  k->add_flag("--no-fuse", ka->no_fuse, "every op its own kernel");
  k->add_flag("--no-flash", ka->no_flash, "do not match attention to flash_attn");
  k->add_flag("--eager", ka->eager, "composites as hand-written kernels, nothing fused");
  k->add_flag("--no-epilogue", ka->no_epilogue, "fusion rule off: elementwise epilogues of matmul/attention");
  k->add_flag("--no-pointwise", ka->no_pointwise, "fusion rule off: elementwise into elementwise");
  k->add_flag("--no-rowwise", ka->no_rowwise, "fusion rule off: last-axis reductions into their producer");
  k->add_flag("--horizontal", ka->horizontal, "fusion rule on: merge independent pointwise kernels of one space");
  k->add_option("--dot", ka->dot, "write the graph with kernels as clusters (Graphviz DOT) to this file");
  k->callback([ka] { kernels_report(*ka); });

  auto aa = std::make_shared<AnalyzeOptions>();
  auto* an = app.add_subcommand("analyze", "roofline estimate of each execution variant, and the layer's memory");
  add_trace_options(an, aa->spec);
  an->add_option("--hardware", aa->hardware, "h100, h200, a100 or cpu (measured)")->check(CLI::IsMember(hardware_names()));
  an->add_flag("--json", aa->json, "JSON output");
  an->callback([aa] { analyze_report(*aa); });

  auto ma = std::make_shared<MemplanOptions>();
  auto* mp = app.add_subcommand("memplan", "plan activation memory: lifetimes, offsets, peak, lower bound");
  add_trace_options(mp, ma->spec);
  mp->add_flag("--json", ma->json, "JSON output");
  mp->add_flag("--no-flash", ma->no_flash, "plan the unfused-attention variant");
  mp->add_flag("--no-reorder", ma->no_reorder, "keep the kernels in graph order");
  mp->add_flag("--no-in-place", ma->no_in_place, "never reuse an input's storage for an output");
  mp->add_option("--svg", ma->svg, "write a picture of the plan to this file");
  mp->add_flag("!--no-sweep", ma->sweep, "skip the table of peak memory against tokens");
  mp->callback([ma] { memplan_report(*ma); });

  auto* cal = app.add_subcommand("calibrate", "measure this machine (sgemm, stream bandwidth) for --hardware cpu");
  cal->callback([] {
    Calibration c = measure_machine();
    save_calibration(c);
    std::printf("sgemm %.1f GFLOP/s, stream bandwidth %.2f GB/s, vector %.1f GFLOP/s, %d threads\nf32 GEMM: %s\nsaved to %s\n",
                c.sgemm_flops / 1e9, c.stream_bandwidth / 1e9, c.vector_flops / 1e9, c.threads, gemm_f32_library(), calibration_path().c_str());
  });
}

}  // namespace tjc
