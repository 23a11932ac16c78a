// OpenCL loaded at run time (runtime/device/opencl/opencl.h): on PoCL, which scripts/setup
// installs, a kernel built from source runs, launches recorded into a
// command buffer replay; a broken kernel is an error with the compiler's log. Without any OpenCL device the tests say why and skip.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/device/opencl/opencl.h"
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

// A command buffer (cl_khr_command_buffer; PoCL has it): launches recorded,
// replayed in order, not run while recorded. (PoCL 3.1 reads the kernels'
// arguments when the buffer is enqueued, not when recorded, against the
// extension's text: a replay must find them as recorded.)
TEST(OpenCL, CommandBuffersReplayInOrder) {
  std::string why;
  if (opencl::devices(&why).empty()) GTEST_SKIP() << why;
  opencl::Context cl;
  if (!cl.can_record()) {
    EXPECT_THROW(cl.begin_record(), Error);
    GTEST_SKIP() << cl.device().name << " has no command buffers";
  }
  const int program = cl.program(
      "__kernel void scale(__global float* y, const float a) { y[get_global_id(0)] *= a; }\n"
      "__kernel void shift(__global float* y, const float b) { y[get_global_id(0)] += b; }\n");
  const int scale = cl.kernel(program, "scale"), shift = cl.kernel(program, "shift");
  const int n = 64;
  std::vector<float> y(n, 1.0f), got(n);
  const int by = cl.buffer(n * sizeof(float));
  cl.write(by, y.data(), n * sizeof(float));
  const float a = 3, b = 1;
  cl.arg(scale, 0, by);
  cl.arg(scale, 1, sizeof a, &a);
  cl.arg(shift, 0, by);
  cl.arg(shift, 1, sizeof b, &b);
  cl.begin_record();
  cl.launch(scale, {n});  // y = 3y
  cl.launch(shift, {n});  // y = y + 1
  const int r = cl.end_record();
  cl.read(by, got.data(), n * sizeof(float));
  EXPECT_EQ(got[0], 1.0f) << "recorded launches ran";
  cl.replay(r);
  cl.replay(r);
  cl.read(by, got.data(), n * sizeof(float));
  for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], 13.0f) << i;  // (3*1 + 1)*3 + 1, in order
  cl.drop(r);
  EXPECT_THROW(cl.replay(r), Error);
  EXPECT_THROW((void)cl.end_record(), Error);
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
