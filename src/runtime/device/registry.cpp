// The registry: every device besides the CPU, one line each, in the order
// they are listed (tjc devices, --device, the error for an unknown name).
// A new device is its folder (runtime/device/<name>/, defining its Kind)
// and its line here.
#include "runtime/device/backend.h"
#include "runtime/device/cuda/backend.h"
#include "runtime/device/opencl/backend.h"

namespace tj::device {

namespace {

constexpr const Kind* kTable[] = {
    &opencl::kind,
    &cuda::kind,
};

}  // namespace

std::span<const Kind* const> kinds() { return kTable; }

const Kind* find_kind(std::string_view name) {
  for (const Kind* k : kTable)
    if (k->name == name) return k;
  return nullptr;
}

}  // namespace tj::device
