// A compiled graph on a device (runtime/device/backend.h: a GPU, or any
// OpenCL device), through its Backend only: the GPU emitter's program
// (codegen/gpu/emit.h) built once, the weights uploaded once, and a launch
// list whose arguments are all set when the sizes are bound, then replayed
// per call: inputs written, launches enqueued in order, outputs read back.
// Activations live in one device arena laid out by the memory plan, as on
// the CPU; temporaries and scratch in one buffer each.
//
// Each set of sizes a call brings (a shape bucket, under the bucketed
// dynamic-shape policy) gets a layout of its own, kept for the next call at
// those sizes (at most 8, least recently used dropped). On CUDA the launch
// list is captured into a CUDA Graph per layout at its first call and
// replayed after: inputs are copied into the layout's static input buffers,
// then one graph launch (the vLLM pattern). On OpenCL, where the device has
// command buffers (cl_khr_command_buffer: PoCL does), the list is recorded
// into one the same way; else it is launched each call.
//
// Caches that kv_write updates in place (donated) live in their input's
// device buffer and are read back into the caller's array after each call,
// so that a call means what it means on the CPU.
//
// TJ_REPLAY=0 launches the list on every call instead (what replay saves
// per call is the difference).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/gpu/emit.h"
#include "runtime/device/backend.h"
#include "runtime/executable.h"

namespace tj {

class DeviceProgram {
 public:
  // `p` (rendered for kind.target) on the first device of `kind`. `held[v]`:
  // the data of each param or constant value the program reads (null for
  // the others), uploaded now. Throws tj::Error when there is no such
  // device or the program does not build.
  DeviceProgram(const device::Kind& kind, const Graph& g, const Schedule& s, gpu::Program p, const std::vector<const void*>& held);
  ~DeviceProgram();
  void run(Bindings& inputs, std::vector<NDArray>& outputs, const RunOptions& o);
  // Median seconds of each schedule kernel (its launches, each waited for)
  // over `reps` runs: Executable::profile on a device.
  std::vector<double> profile(Bindings& inputs, int reps);
  std::string device() const;  // "OpenCL: <name> (<platform>)", "CUDA: <name> (sm_90)"
  size_t launches() const;

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace tj
