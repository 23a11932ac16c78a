// OpenCL, loaded at run time: the ICD loader (libOpenCL.so.1; Debian's
// ocl-icd, with PoCL running OpenCL on this CPU, or a GPU vendor's driver
// elsewhere) is opened on first use, never linked, so tensorjit builds and
// runs where there is none. The first piece of the GPU path (issue 17):
// devices, programs built from OpenCL C, buffers, launches, run in order on
// one queue. Failures are tj::Error naming the call and its error code; a
// build failure carries the compiler's log.
//
//   tj::opencl::Context cl;                       // the first device
//   auto k = cl.build(source, "saxpy");
//   auto x = cl.buffer(bytes);  cl.write(x, data, bytes);
//   cl.arg(k, 0, x);  cl.arg(k, 1, sizeof(float), &a);
//   cl.launch(k, {n});  cl.read(x, out, bytes);   // read waits for the queue
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tj::opencl {

struct Device {
  std::string platform, name, version;
  bool gpu = false;
  int compute_units = 0;
  uint64_t memory_bytes = 0;
};

// Every device of every platform; empty when there is no loader or no
// platform, and then `why` (if given) says which.
std::vector<Device> devices(std::string* why = nullptr);

class Context {
 public:
  // Device `index` of devices(); a tj::Error when there is no such device.
  explicit Context(size_t index = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Device& device() const;
  // OpenCL C `source` built for this device (a build failure is an Error
  // with the compiler's log): its handle; then its kernel `name`'s.
  int program(const std::string& source, const std::string& options = "");
  int kernel(int program, const std::string& name);
  int build(const std::string& source, const std::string& name, const std::string& options = "");  // both
  int buffer(size_t bytes);  // device memory: its handle
  void release(int buffer);  // the handle is not valid after
  // `bytes` at byte `offset` of the buffer; both wait for the launches before them.
  void write(int buffer, const void* data, size_t bytes, size_t offset = 0);
  void read(int buffer, void* data, size_t bytes, size_t offset = 0);
  void arg(int kernel, unsigned index, int buffer);
  void arg(int kernel, unsigned index, size_t bytes, const void* value);
  // `global` work items (1 to 3 dims), work groups of `local` (empty: the
  // implementation's choice).
  void launch(int kernel, const std::vector<size_t>& global, const std::vector<size_t>& local = {});
  void finish();
  // A command buffer (cl_khr_command_buffer, where the device has it: PoCL
  // does): the launches between begin_record and end_record are recorded,
  // in order, with their arguments as set then, not run; replay() enqueues
  // them all at once (OpenCL's nearest thing to a CUDA Graph). PoCL 3.1
  // reads the kernels' arguments at the replay, not at the recording (the
  // extension says the recording): replay with them as they were recorded.
  bool can_record() const;
  void begin_record();
  int end_record();
  void abort_record();  // a recording given up (a launch failed): nothing kept
  void replay(int record);
  void drop(int record);

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace tj::opencl
