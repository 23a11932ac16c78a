// CUDA, loaded at run time: the driver (libcuda.so.1) is opened on first
// use and never linked, so tensorjit builds and runs where there is none.
// Programs are CUDA C (codegen/gpu) compiled to a cubin for the device's
// architecture: from the cache ($TJ_CACHE_DIR/cuda), else with NVRTC
// (libnvrtc, opened at run time), else with nvcc; a cache entry made on a
// machine with the toolkit serves one without it.
//
// Each call makes the context current for itself and leaves the caller's
// current after (a CUDA runtime user in the same thread keeps its device).
// Allocations not freed are freed with the context. Launches go in order on
// one stream. A launch list can be captured into a
// CUDA Graph and replayed (begin_record, end_record, replay): one graph
// launch instead of one launch per kernel.
//
// Written without a GPU to run it on: scripts/gpu-check exercises it where
// one is lent. Failures are tj::Error naming the call and its error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tj::cuda {

struct Device {
  std::string name;
  uint64_t memory_bytes = 0;
  int major = 0, minor = 0;  // compute capability
  int ordinal = 0;           // the driver's number for it
};

// Every device the driver reports; empty when there is no driver or no
// device, and then `why` (if given) says which.
std::vector<Device> devices(std::string* why = nullptr);

// `source` compiled to a cubin for `arch` ("sm_90"): through the cache,
// NVRTC or nvcc (`how` says which). Needs no GPU. Throws tj::Error with the
// compiler's log when it does not compile, or when there is no compiler
// and no cache entry.
std::string compile(const std::string& source, const std::string& arch, std::string* how = nullptr);

class Context {
 public:
  // Device `index` of devices(); a tj::Error when there is no such device.
  explicit Context(size_t index = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Device& device() const;
  std::string arch() const;  // "sm_90"
  int module(const std::string& source);             // compiled (compile()) and loaded: its handle
  int kernel(int module, const std::string& name);   // an extern "C" __global__ function of it
  uint64_t alloc(size_t bytes);                      // a device address
  void free(uint64_t address);
  void write(uint64_t address, const void* data, size_t bytes);  // in stream order
  void read(uint64_t address, void* data, size_t bytes);         // waits for the stream
  // `args` are the kernel's parameters' addresses, as cuLaunchKernel takes them.
  void launch(int kernel, size_t groups, size_t group, void** args);
  void begin_record();
  int end_record();  // the launches since begin_record as an instantiated graph
  void abort_record();  // a recording given up (a launch failed): nothing kept, no error
  void replay(int graph);
  void drop(int graph);
  void sync();

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace tj::cuda
