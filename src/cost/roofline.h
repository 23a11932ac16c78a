// The roofline cost model: a kernel takes max(FLOPs / peak for its kind,
// bytes / bandwidth) plus a fixed launch overhead. Matmul and attention
// kernels use the matmul peak for their dtype; everything else the vector peak.
#pragma once

#include "cost/hardware.h"
#include "schedule/fusion.h"

namespace tj {

struct KernelCost {
  double seconds = 0, compute_seconds = 0, memory_seconds = 0;
  bool memory_bound = false;
};

KernelCost kernel_cost(const Kernel& k, DType dtype, const HardwareProfile& hw);

struct ScheduleCost {
  int64_t kernels = 0, bytes = 0, flops = 0;
  double seconds = 0;
};
// `dtype` picks the matmul peak (the model's activation dtype).
ScheduleCost schedule_cost(const Schedule& s, DType dtype, const HardwareProfile& hw);

}  // namespace tj
