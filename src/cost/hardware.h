// Hardware profiles for the roofline model, as data. The GPU figures are the
// vendors' dense peaks; `cpu` is measured on this machine by `tjc calibrate`
// and saved (see calibrate.h).
#pragma once

#include <string>
#include <vector>

#include "tensorjit/dtype.h"

namespace tj {

struct HardwareProfile {
  std::string name;
  double matmul_flops_16;   // bf16/f16 matmul peak, FLOP/s
  double matmul_flops_32;   // f32 matmul peak (TF32 tensor cores on GPUs; sgemm on the CPU)
  double vector_flops;      // everything else, FLOP/s
  double bandwidth;         // memory bandwidth, bytes/s
  double launch_seconds;    // fixed cost per kernel
  std::string source;       // where the figures come from

  double matmul_flops(DType t) const { return t == DType::bf16 || t == DType::f16 ? matmul_flops_16 : matmul_flops_32; }
};

// "h100", "h200", "a100", or "cpu" (measured; calibrates on first use).
HardwareProfile hardware_profile(const std::string& name);
std::vector<std::string> hardware_names();

}  // namespace tj
