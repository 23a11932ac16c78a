// The device compiled tests run on. CTest runs the compiled suites
// (Compiled.*, EdgeSemantics.*) once on the CPU and once more with
// TJ_DEVICE=opencl (tests/CMakeLists.txt): every compilation that does not
// name a device then runs on OpenCL (PoCL on a machine without a GPU).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "compiler/driver.h"
#include "runtime/device/opencl/opencl.h"

namespace tj {

inline Device test_device() { return requested_device({}); }
inline bool testing_on_cpu() { return test_device().is_cpu(); }

// Why the requested device cannot run here ("" when it can): such a run
// skips its tests and says so.
inline std::string test_device_missing() {
  const std::string_view name = device_name(test_device());
  if (name == "opencl") {
    std::string why;
    return opencl::devices(&why).empty() ? "no OpenCL device: " + why : "";
  }
  if (name == "cuda") return "CUDA programs are not run yet";
  return "";
}

}  // namespace tj

// In a fixture's SetUp: skip every test when the device is not here.
#define TJ_SKIP_WITHOUT_TEST_DEVICE()                                          \
  do {                                                                         \
    if (std::string why = ::tj::test_device_missing(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)
// Skip a test of the C++ backend itself (its source, its threads) on a device.
#define TJ_CPU_ONLY(why)                                                     \
  do {                                                                       \
    if (!::tj::testing_on_cpu()) GTEST_SKIP() << "the C++ backend's own: " << why; \
  } while (0)
