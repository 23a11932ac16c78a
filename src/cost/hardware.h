// Hardware profiles for the roofline model, as data. The GPU figures are the
// vendors' dense peaks; the `cpu` profile is measured on this machine
// (tune/calibrate.h: hardware_profile() gives any of them by name).
#pragma once

#include <optional>
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

// "h100", "h200" or "a100", from the vendors' data sheets; nothing for another name.
std::optional<HardwareProfile> datasheet_profile(const std::string& name);
std::vector<std::string> datasheet_names();

}  // namespace tj
