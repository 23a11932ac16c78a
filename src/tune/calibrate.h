// Measures this machine for the `cpu` hardware profile: sgemm throughput
// (the f32 GEMM library, all cores), STREAM-triad bandwidth, and elementwise throughput.
// Results are saved as JSON in the tensorjit cache directory and reused.
#pragma once

#include <string>

#include "cost/hardware.h"

namespace tj {

struct Calibration {
  double sgemm_flops = 0;     // FLOP/s, f32 GEMM of 1024^3 (best of several)
  double stream_bandwidth = 0; // bytes/s, triad a = b + s*c over 3 x 64 MiB (counting 3 arrays)
  double vector_flops = 0;    // FLOP/s, a vectorizable fused multiply-add loop in cache
  int threads = 0;
  std::string machine;  // machine_identity() when measured: a file from another machine is measured again
  std::string date;
};

// The CPU's model name, family and model numbers, the pool's threads and the
// f32 GEMM library: what the figures depend on ("Intel(R) Xeon(R) Processor
// (family 6 model 207), 2 threads, oneDNN 2.6.3 (avx512_core_bf16)").
std::string machine_identity();

Calibration measure_machine();
// The STREAM triad alone (bytes/s, best of 7, about 0.2 s): for a benchmark
// that wants the bandwidth measured beside its own timings.
double measure_stream_bandwidth();
std::string calibration_path();                  // $TJ_CACHE_DIR, $XDG_CACHE_HOME/tensorjit or ~/.cache/tensorjit
bool load_calibration(Calibration* out);         // false if absent, unreadable or of another machine
void save_calibration(const Calibration& c);     // atomic: temp file + rename
HardwareProfile cpu_profile(const Calibration& c);

// A data sheet's profile (cost/hardware.h), or "cpu": this machine,
// calibrated on first use and saved.
HardwareProfile hardware_profile(const std::string& name);
std::vector<std::string> hardware_names();  // the data sheets' and "cpu"

}  // namespace tj
