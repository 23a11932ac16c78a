// OpenCL as a device (runtime/device/backend.h): kernels rendered as OpenCL
// C, run on the first device of opencl::devices() through the driver of
// this folder (opencl.h).
#pragma once

#include "runtime/device/backend.h"

namespace tj::opencl {

extern const device::Kind kind;  // "opencl"

}  // namespace tj::opencl
