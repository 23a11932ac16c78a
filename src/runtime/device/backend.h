// The devices compiled code runs on besides the CPU, behind one interface.
// A Backend is what a DeviceProgram (runtime/device_program.h) needs of a
// device's runtime: a program built from the GPU emitter's source, buffers,
// copies, kernel arguments, launches in order, and, where the runtime has
// such a thing, a launch list recorded once and replayed. A Kind is a row
// of the registry: a device's name, the GPU C its kernels are rendered as,
// how to open one, and how to list what this machine has.
//
// The registry is one table (runtime/device/registry.cpp); each device is
// one folder beside this file, its driver and its Backend:
//
//   runtime/device/opencl/   the ICD loader, opened at run time (PoCL on a CPU)
//   runtime/device/cuda/     the NVIDIA driver, opened at run time
//
// Adding a device is one folder that defines its Kind (folder/backend.h
// declares it) and one line in the table. The CPU is not a row: its code is
// C++ (codegen/cpp), run by the Executable itself; the list of every place
// code runs is the CPU and then the table, in order (compiler/options.h:
// device_names()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/gpu/renderer.h"

namespace tj::device {

// Where a buffer parameter points: a device buffer and a byte offset in it.
struct Loc {
  int buffer = -1;
  int64_t offset = 0;
};

// One device, opened. Kernels are numbered in the order load() was given
// their names; buffers by what buffer() returned. Everything is enqueued
// in order on one queue (stream); read() and finish() wait for it.
class Backend {
 public:
  virtual ~Backend() = default;
  // "OpenCL: <name> (<platform>)", "CUDA: <name> (sm_90)".
  virtual std::string name() const = 0;
  // `source` (the GPU emitter's program, in the Kind's target) built, and
  // its kernels `kernels` looked up; a tj::Error with the compiler's log
  // when it does not build.
  virtual void load(const std::string& source, const std::vector<std::string>& kernels) = 0;
  virtual int buffer(size_t bytes) = 0;  // device memory: its number
  virtual void release(int buffer) = 0;
  virtual void write(const Loc& at, const void* data, size_t bytes) = 0;
  virtual void read(const Loc& at, void* data, size_t bytes) = 0;  // waits for what is enqueued
  // Kernel k's arguments: its buffers, the sizes, the status word (the
  // order codegen/gpu/renderer.h gives a kernel's parameters).
  virtual void arguments(int k, const std::vector<Loc>& buffers, const std::vector<int64_t>& sizes, const Loc& status) = 0;
  // `groups` work-groups of `group` work-items each.
  virtual void launch(int k, size_t groups, size_t group) = 0;
  // The launches `enqueue` makes, recorded once to be replayed (a CUDA
  // Graph, an OpenCL command buffer): the record's number; -1 where the
  // device has no such thing (then they ran now, and the caller launches
  // them again each time).
  virtual int record(const std::function<void()>& enqueue) {
    enqueue();
    return -1;
  }
  virtual void replay(int) {}
  virtual void drop(int) {}
  virtual void finish() = 0;  // waits for what is enqueued
};

// For a Backend's record(): the launches `enqueue` makes, on a driver
// context whose recording has begun (OpenCL's command buffer, CUDA's stream
// capture), ended into a record; a launch that throws abandons the record.
template <class Context>
int record_on(Context& c, const std::function<void()>& enqueue) {
  try {
    enqueue();
  } catch (...) {
    c.abort_record();  // the launch's error is the one to report
    throw;
  }
  return c.end_record();
}

// A device of the registry. Every field is a constant, so that the rows
// are ready before any code runs.
struct Kind {
  std::string_view name;   // "opencl": what --device, $TJ_DEVICE and device= say
  std::string_view about;  // "an OpenCL device; PoCL runs one on a CPU" (--device's help)
  gpu::Target target;      // the GPU C its kernels are rendered as (codegen/gpu)
  // Its first device, opened; a tj::Error saying why there is none (no
  // ICD loader, no driver, no device).
  std::unique_ptr<Backend> (*open)();
  // What this machine has, a line each ("<name>, <what it is>"); empty when
  // nothing, and then `why` says why (tjc devices).
  std::vector<std::string> (*list)(std::string* why);
};

// The registry's rows, in order (tjc devices lists them so, and the
// device names are listed so).
std::span<const Kind* const> kinds();
// The row named `name`; null when none is.
const Kind* find_kind(std::string_view name);

}  // namespace tj::device
