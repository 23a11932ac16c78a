// What a compilation is asked for: the options of the compiler driver
// (compiler/driver.h), which compile() and everything that
// compiles pass down.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reference/interpreter.h"
#include "runtime/device/backend.h"
#include "schedule/fusion.h"

namespace tj {

class ThreadPool;

// Where the kernels run: this CPU (generated C++, codegen/cpp), or a device
// of the registry (runtime/device/backend.h: an OpenCL device, PoCL running
// one on a CPU; an NVIDIA GPU through CUDA), its kernels rendered as its GPU
// C (codegen/gpu). A value: the CPU, or the device's row of the registry.
class Device {
 public:
  Device() = default;  // the CPU
  explicit Device(const device::Kind& kind) : kind_(&kind) {}
  bool is_cpu() const { return kind_ == nullptr; }
  const device::Kind& kind() const;  // not on the CPU
  friend bool operator==(const Device&, const Device&) = default;

 private:
  const device::Kind* kind_ = nullptr;
};
// Every place code runs, by name: "cpu", then the registry's devices in
// its order ("opencl", "cuda").
std::vector<std::string_view> device_names();
std::string_view device_name(Device d);
// What runs there: "generated C++", "an OpenCL device; PoCL runs one on a CPU".
std::string_view device_about(Device d);
// "cpu, opencl or cuda"; with `about`, each with what runs there:
// "cpu (generated C++), opencl (an OpenCL device; ...) or cuda (an NVIDIA GPU)".
std::string device_list(bool about = false);
// A name of device_names(); anything else is a tj::Error listing them.
Device parse_device(std::string_view name);

struct CompileOptions {
  FusionOptions fusion;
  bool reorder = true;               // reorder kernels to lower peak memory
  std::vector<std::string> passes;   // empty: the default pipeline (params frozen)
  // The format of the products' frozen weights: f32, bf16, or i8 with a
  // scale per output channel (passes/quantize_weights.cpp).
  DType weights = DType::f32;
  // Typical values of the graph's size symbols (for choices such as running
  // a kernel in parallel); a symbol not given counts as 64.
  SymEnv size_hint;
  // Look the optimized program up in the program cache, and store it there
  // (compiler/program_cache.h): a warm start skips the passes.
  bool program_cache = true;
  // Outputs to write into inputs' arrays, which each call gives up (fusion.h:
  // Donation; Executable::output_aliases() says which were honored).
  std::vector<Donation> donate;
  // Time the candidate schedules of matrix-vector products and attentions
  // on this machine and keep the winners (tune/autotune.h); also on
  // with TJ_AUTOTUNE=1 when not set here (false here: off whatever the
  // environment says). A later compilation takes them from the cache.
  std::optional<bool> autotune;
  // Where the kernels run; not set: $TJ_DEVICE, else the CPU. A device that
  // is not present is an error when compiling, never a silent fallback.
  std::optional<Device> device;
  // The threads the generated code runs on; null: ThreadPool::global().
  ThreadPool* pool = nullptr;
};

}  // namespace tj
