// tjc devices: what this machine can run tensorjit's code on: the CPU (the
// generated C++), OpenCL devices (through the loader, PoCL on a CPU), and
// NVIDIA GPUs (through the driver, libcuda.so.1, opened at run time:
// runtime/device/cuda/cuda.h); compiled code runs on any of them (--device).
#include <cstdio>
#include <string>

#include "runtime/device/cuda/cuda.h"
#include "runtime/device/opencl/opencl.h"
#include "tjc/common.h"
#include "tune/calibrate.h"

namespace tjc {

namespace {

void cmd_devices() {
  std::printf("cpu: %s (generated C++)\n", tj::machine_identity().c_str());
  std::string why;
  auto cl = tj::opencl::devices(&why);
  if (cl.empty()) std::printf("opencl: none: %s\n", why.c_str());
  for (size_t i = 0; i < cl.size(); ++i)
    std::printf("opencl %zu: %s, %s (%s, %s, %d compute units, %.1f GiB)\n", i, cl[i].name.c_str(), cl[i].gpu ? "GPU" : "not a GPU",
                cl[i].platform.c_str(), cl[i].version.c_str(), cl[i].compute_units, static_cast<double>(cl[i].memory_bytes) / (1 << 30));
  why.clear();
  auto cuda = tj::cuda::devices(&why);
  if (cuda.empty()) std::printf("cuda: none: %s\n", why.c_str());
  for (size_t i = 0; i < cuda.size(); ++i)
    std::printf("cuda %zu: %s, sm_%d%d, %.1f GiB\n", i, cuda[i].name.c_str(), cuda[i].major, cuda[i].minor,
                static_cast<double>(cuda[i].memory_bytes) / (1 << 30));
}

}  // namespace

void add_devices_command(CLI::App& app) {
  app.add_subcommand("devices", "what this machine can run code on: the CPU, OpenCL devices, NVIDIA GPUs")->callback(cmd_devices);
}

}  // namespace tjc
