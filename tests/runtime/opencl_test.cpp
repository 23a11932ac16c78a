// OpenCL loaded at run time (runtime/opencl.h): on PoCL, which scripts/setup
// installs, a kernel built from source runs; a broken one is an error with
// the compiler's log. Without any OpenCL device the tests say why and skip.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/opencl.h"
#include "tensorjit/error.h"

namespace tj {
namespace {

TEST(OpenCL, AKernelBuiltFromSourceRuns) {
  std::string why;
  if (opencl::devices(&why).empty()) GTEST_SKIP() << why;
  opencl::Context cl;
  EXPECT_FALSE(cl.device().name.empty());
  EXPECT_GE(cl.device().compute_units, 1);
  const int k = cl.build(
      "__kernel void saxpy(__global float* y, __global const float* x, const float a, const int n) {\n"
      "  const int i = get_global_id(0);\n"
      "  if (i < n) y[i] = a * x[i] + y[i];\n"
      "}\n",
      "saxpy");
  const int n = 1000;
  std::vector<float> x(n), y(n), got(n);
  for (int i = 0; i < n; ++i) x[i] = std::sin(static_cast<float>(i)), y[i] = static_cast<float>(i % 7);
  const int bx = cl.buffer(n * sizeof(float)), by = cl.buffer(n * sizeof(float));
  cl.write(bx, x.data(), n * sizeof(float));
  cl.write(by, y.data(), n * sizeof(float));
  const float a = 2.5f;
  cl.arg(k, 0, by);
  cl.arg(k, 1, bx);
  cl.arg(k, 2, sizeof a, &a);
  cl.arg(k, 3, sizeof n, &n);
  cl.launch(k, {1024});
  cl.read(by, got.data(), n * sizeof(float));
  for (int i = 0; i < n; ++i) ASSERT_NEAR(got[i], a * x[i] + y[i], 1e-6f * (1 + std::fabs(a * x[i] + y[i]))) << i;
}

TEST(OpenCL, ErrorsAreClear) {
  std::string why;
  if (opencl::devices(&why).empty()) {
    EXPECT_THROW(opencl::Context{}, Error);  // no device: an error, not a crash
    GTEST_SKIP() << why;
  }
  opencl::Context cl;
  try {
    cl.build("__kernel void broken(__global float* y) { y[0] = undeclared; }\n", "broken");
    FAIL() << "a broken kernel built";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("building a program failed"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("undeclared"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cl.launch(7, {16}), Error);  // no such kernel
  EXPECT_THROW(opencl::Context(1000), Error);
}

}  // namespace
}  // namespace tj
