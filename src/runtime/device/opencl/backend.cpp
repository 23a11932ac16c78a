// OpenCL's Backend: buffers are memory objects, each argument a memory
// object and the byte offset in it; a launch list is recorded into a
// command buffer where the device has them (cl_khr_command_buffer: PoCL
// does).
#include "runtime/device/opencl/backend.h"

#include <cstdio>

#include "runtime/device/opencl/opencl.h"
#include "tensorjit/error.h"

namespace tj::opencl {

namespace {

using device::Loc;

class OpenClBackend final : public device::Backend {
 public:
  std::string name() const override { return "OpenCL: " + cl_.device().name + " (" + cl_.device().platform + ")"; }
  void load(const std::string& source, const std::vector<std::string>& kernels) override {
    // -w: generated code compares a value with itself (lt(m, m)) and declares
    // index variables it may not read; the OpenCL compiler would print that.
    const int program = cl_.program(source, "-w");
    for (const auto& k : kernels) cl_.kernel(program, k);
  }
  int buffer(size_t bytes) override { return cl_.buffer(bytes); }
  void release(int b) override { cl_.release(b); }
  void write(const Loc& at, const void* data, size_t bytes) override { cl_.write(at.buffer, data, bytes, static_cast<size_t>(at.offset)); }
  void read(const Loc& at, void* data, size_t bytes) override { cl_.read(at.buffer, data, bytes, static_cast<size_t>(at.offset)); }
  void arguments(int k, const std::vector<Loc>& buffers, const std::vector<int64_t>& sizes, const Loc& status) override {
    unsigned a = 0;
    for (const Loc& at : buffers) {  // a memory object and the byte offset in it
      cl_.arg(k, a++, at.buffer);
      cl_.arg(k, a++, sizeof(int64_t), &at.offset);
    }
    for (const int64_t& v : sizes) cl_.arg(k, a++, sizeof v, &v);
    cl_.arg(k, a++, status.buffer);
  }
  void launch(int k, size_t groups, size_t group) override { cl_.launch(k, {groups * group}, {group}); }
  void finish() override { cl_.finish(); }
  // A layout's record is replayed only while it is current, its arguments
  // set (PoCL reads them at the replay).
  int record(const std::function<void()>& enqueue) override {
    if (!cl_.can_record()) return Backend::record(enqueue);
    try {
      cl_.begin_record();
    } catch (const Error&) {  // a device that lists the extension but makes no buffer: launched each call
      return Backend::record(enqueue);
    }
    return device::record_on(cl_, enqueue);
  }
  void replay(int record) override { cl_.replay(record); }
  void drop(int record) override { cl_.drop(record); }

 private:
  Context cl_;
};

std::unique_ptr<device::Backend> open() { return std::make_unique<OpenClBackend>(); }

std::vector<std::string> list(std::string* why) {
  std::vector<std::string> lines;
  for (const Device& d : devices(why)) {
    char memory[32];
    std::snprintf(memory, sizeof memory, "%.1f GiB", static_cast<double>(d.memory_bytes) / (1 << 30));
    lines.push_back(d.name + ", " + (d.gpu ? "GPU" : "not a GPU") + " (" + d.platform + ", " + d.version + ", " + std::to_string(d.compute_units) +
                    " compute units, " + memory + ")");
  }
  return lines;
}

}  // namespace

constinit const device::Kind kind = {
    .name = "opencl",
    .about = "an OpenCL device; PoCL runs one on a CPU",
    .target = gpu::Target::opencl,
    .open = open,
    .list = list,
};

}  // namespace tj::opencl
