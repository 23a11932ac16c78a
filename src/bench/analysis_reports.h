// Shape-only reports of tjc kernels, analyze and memplan: a model's fused
// kernels (as a table, JSON or a DOT picture), the roofline estimate of each
// execution variant with the layer's memory, and the activation memory plan
// (lifetimes, offsets, peak, lower bound; an SVG picture; a sweep over
// prefill lengths). Each prints to standard output.
#pragma once

#include <string>

#include "bench/model.h"

namespace tj::bench {

struct KernelsOptions {
  ModelSpec spec;
  bool json = false, no_fuse = false, no_flash = false, eager = false, no_epilogue = false, no_pointwise = false,
       no_rowwise = false, horizontal = false;
  std::string dot;
};

struct AnalyzeOptions {
  ModelSpec spec;
  std::string hardware = "h100";
  bool json = false;
};

struct MemplanOptions {
  ModelSpec spec;
  bool json = false, no_flash = false, no_reorder = false, no_in_place = false, sweep = true;
  std::string svg;
};

void kernels_report(const KernelsOptions& a);
void analyze_report(const AnalyzeOptions& a);
void memplan_report(const MemplanOptions& a);

}  // namespace tj::bench
