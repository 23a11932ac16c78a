// CUDA as a device (runtime/device/backend.h): kernels rendered as CUDA C,
// run on the first device of cuda::devices() through the driver of this
// folder (cuda.h).
#pragma once

#include "runtime/device/backend.h"

namespace tj::cuda {

extern const device::Kind kind;  // "cuda"

}  // namespace tj::cuda
