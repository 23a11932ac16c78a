#include "cost/roofline.h"

#include <algorithm>

namespace tj {

KernelCost kernel_cost(const Kernel& k, DType dtype, const HardwareProfile& hw) {
  bool mm = k.kind == KernelKind::matmul || k.kind == KernelKind::attention || k.kind == KernelKind::conv;
  KernelCost c;
  c.compute_seconds = static_cast<double>(k.flops) / (mm ? hw.matmul_flops(dtype) : hw.vector_flops);
  c.memory_seconds = static_cast<double>(k.bytes_read + k.bytes_written) / hw.bandwidth;
  c.memory_bound = c.memory_seconds >= c.compute_seconds;
  c.seconds = std::max(c.compute_seconds, c.memory_seconds) + hw.launch_seconds;
  return c;
}

ScheduleCost schedule_cost(const Schedule& s, DType dtype, const HardwareProfile& hw) {
  ScheduleCost c;
  for (const Kernel& k : s.kernels) {
    ++c.kernels;
    c.bytes += k.bytes_read + k.bytes_written;
    c.flops += k.flops;
    c.seconds += kernel_cost(k, dtype, hw).seconds;
  }
  return c;
}

}  // namespace tj
