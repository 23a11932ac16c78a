// tjc devices: what this machine can run tensorjit's code on: the CPU (the
// generated C++), then each device of the registry (runtime/device/backend.h:
// OpenCL devices through the loader, PoCL on a CPU; NVIDIA GPUs through the
// driver, libcuda.so.1, opened at run time); compiled code runs on any of
// them (--device).
#include <cstdio>
#include <string>

#include "compiler/options.h"
#include "runtime/device/backend.h"
#include "tjc/common.h"
#include "tune/calibrate.h"

namespace tjc {

namespace {

void cmd_devices() {
  std::printf("cpu: %s (%s)\n", tj::machine_identity().c_str(), std::string(tj::device_about(tj::Device())).c_str());
  for (const tj::device::Kind* k : tj::device::kinds()) {
    const std::string name(k->name);
    std::string why;
    const std::vector<std::string> lines = k->list(&why);
    if (lines.empty()) std::printf("%s: none: %s\n", name.c_str(), why.c_str());
    for (size_t i = 0; i < lines.size(); ++i) std::printf("%s %zu: %s\n", name.c_str(), i, lines[i].c_str());
  }
}

}  // namespace

void add_devices_command(CLI::App& app) {
  app.add_subcommand("devices", "what this machine can run code on: the CPU, then the devices of each kind --device names")->callback(cmd_devices);
}

}  // namespace tjc
