// tjc devices: what this machine can run tensorjit's code on: the CPU (the
// generated C++), OpenCL devices (through the loader, PoCL on a CPU), and
// NVIDIA GPUs (through the driver, libcuda.so.1, opened at run time). Code
// generation for the GPUs is issue 17's; this says what is there.
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "cost/calibrate.h"
#include "runtime/opencl.h"
#include "tjc/common.h"

namespace tjc {

namespace {

// The CUDA driver's devices, by name and memory; or why there are none.
std::vector<std::string> cuda_devices(std::string* why) {
  std::vector<std::string> r;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    *why = "no NVIDIA driver (libcuda.so.1 not found)";
    return r;
  }
  using Init = int (*)(unsigned);
  using Count = int (*)(int*);
  using Get = int (*)(int*, int);
  using Name = int (*)(char*, int, int);
  using Memory = int (*)(size_t*, int);
  auto init = reinterpret_cast<Init>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<Count>(dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<Get>(dlsym(lib, "cuDeviceGet"));
  auto name = reinterpret_cast<Name>(dlsym(lib, "cuDeviceGetName"));
  auto memory = reinterpret_cast<Memory>(dlsym(lib, "cuDeviceTotalMem_v2"));
  int n = 0;
  if (!init || !count || !get || !name || !memory) {
    *why = "the NVIDIA driver lacks an entry point";
  } else if (int e = init(0); e != 0) {
    *why = "cuInit failed with error " + std::to_string(e) + " (no usable GPU)";
  } else if (count(&n) != 0 || n == 0) {
    *why = "the NVIDIA driver reports no device";
  } else {
    for (int i = 0; i < n; ++i) {
      int d = 0;
      char text[256] = {0};
      size_t bytes = 0;
      if (get(&d, i) != 0 || name(text, sizeof text - 1, d) != 0) continue;
      memory(&bytes, d);
      char line[400];
      std::snprintf(line, sizeof line, "%s, %.1f GiB", text, static_cast<double>(bytes) / (1 << 30));
      r.push_back(line);
    }
  }
  dlclose(lib);
  return r;
}

void cmd_devices() {
  std::printf("cpu: %s (generated C++)\n", tj::machine_identity().c_str());
  std::string why;
  auto cl = tj::opencl::devices(&why);
  if (cl.empty()) std::printf("opencl: none: %s\n", why.c_str());
  for (size_t i = 0; i < cl.size(); ++i)
    std::printf("opencl %zu: %s, %s (%s, %s, %d compute units, %.1f GiB)\n", i, cl[i].name.c_str(), cl[i].gpu ? "GPU" : "not a GPU",
                cl[i].platform.c_str(), cl[i].version.c_str(), cl[i].compute_units, static_cast<double>(cl[i].memory_bytes) / (1 << 30));
  why.clear();
  auto cuda = cuda_devices(&why);
  if (cuda.empty()) std::printf("cuda: none: %s\n", why.c_str());
  for (size_t i = 0; i < cuda.size(); ++i) std::printf("cuda %zu: %s\n", i, cuda[i].c_str());
}

}  // namespace

void add_devices_command(CLI::App& app) {
  app.add_subcommand("devices", "what this machine can run code on: the CPU, OpenCL devices, NVIDIA GPUs")->callback(cmd_devices);
}

}  // namespace tjc
