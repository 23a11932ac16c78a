// Progress lines: none for work shorter than the quiet time, one per
// interval and a total for longer work.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "support/log.h"
#include "support/progress.h"

namespace tj {
namespace {

TEST(Progress, QuietWhenShortThenLinesAndATotal) {
  enable_log("progress");
  ASSERT_TRUE(Progress::wanted());
  ::testing::internal::CaptureStderr();
  { Progress quick("compiling", "3 kernels", 5.0, 5.0); }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ::testing::internal::CaptureStderr();
  {
    Progress slow("compiling", "3 kernels", 0.05, 10.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("[tensorjit] compiling: 3 kernels, 0 s\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[tensorjit] compiling: 3 kernels, done in 0."), std::string::npos) << out;
}

}  // namespace
}  // namespace tj
