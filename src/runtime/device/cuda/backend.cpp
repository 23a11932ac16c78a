// CUDA's Backend: buffers are device addresses, offsets applied here; each
// kernel's parameters are kept (cuLaunchKernel takes their addresses), and
// a launch list is captured into a CUDA Graph.
#include "runtime/device/cuda/backend.h"

#include <cstdio>

#include "runtime/device/cuda/cuda.h"

namespace tj::cuda {

namespace {

using device::Loc;

class CudaBackend final : public device::Backend {
 public:
  std::string name() const override { return "CUDA: " + cu_.device().name + " (" + cu_.arch() + ")"; }
  void load(const std::string& source, const std::vector<std::string>& kernels) override {
    const int m = cu_.module(source);
    for (const auto& k : kernels) cu_.kernel(m, k);
    params_.resize(kernels.size());
    pointers_.resize(kernels.size());
  }
  int buffer(size_t bytes) override {
    addresses_.push_back(cu_.alloc(bytes));
    return static_cast<int>(addresses_.size() - 1);
  }
  void release(int b) override {
    cu_.free(addresses_.at(static_cast<size_t>(b)));
    addresses_[static_cast<size_t>(b)] = 0;
  }
  void write(const Loc& at, const void* data, size_t bytes) override { cu_.write(address(at), data, bytes); }
  void read(const Loc& at, void* data, size_t bytes) override { cu_.read(address(at), data, bytes); }
  void arguments(int k, const std::vector<Loc>& buffers, const std::vector<int64_t>& sizes, const Loc& status) override {
    auto& p = params_[static_cast<size_t>(k)];
    p.clear();
    for (const Loc& at : buffers) p.push_back(address(at));
    for (int64_t v : sizes) p.push_back(static_cast<uint64_t>(v));
    p.push_back(address(status));
    auto& q = pointers_[static_cast<size_t>(k)];
    q.clear();
    for (uint64_t& v : p) q.push_back(&v);
  }
  void launch(int k, size_t groups, size_t group) override { cu_.launch(k, groups, group, pointers_[static_cast<size_t>(k)].data()); }
  int record(const std::function<void()>& enqueue) override {
    cu_.begin_record();
    return device::record_on(cu_, enqueue);
  }
  void replay(int graph) override { cu_.replay(graph); }
  void drop(int graph) override { cu_.drop(graph); }
  void finish() override { cu_.sync(); }

 private:
  uint64_t address(const Loc& at) const { return addresses_.at(static_cast<size_t>(at.buffer)) + static_cast<uint64_t>(at.offset); }
  Context cu_;
  std::vector<uint64_t> addresses_;
  std::vector<std::vector<uint64_t>> params_;  // per kernel: its parameters' values (all 8 bytes wide)
  std::vector<std::vector<void*>> pointers_;   // and their addresses
};

std::unique_ptr<device::Backend> open() { return std::make_unique<CudaBackend>(); }

std::vector<std::string> list(std::string* why) {
  std::vector<std::string> lines;
  for (const Device& d : devices(why)) {
    char memory[32];
    std::snprintf(memory, sizeof memory, "%.1f GiB", static_cast<double>(d.memory_bytes) / (1 << 30));
    lines.push_back(d.name + ", sm_" + std::to_string(d.major) + std::to_string(d.minor) + ", " + memory);
  }
  return lines;
}

}  // namespace

constinit const device::Kind kind = {
    .name = "cuda",
    .about = "an NVIDIA GPU",
    .target = gpu::Target::cuda,
    .open = open,
    .list = list,
};

}  // namespace tj::cuda
