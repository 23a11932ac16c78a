// Build and load through the compile cache: misses, hits, corrupt and
// truncated entries, compile errors, a missing compiler.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "codegen/cpp/build.h"
#include "tensorjit/error.h"

namespace tj {
namespace {

namespace fs = std::filesystem;

class BuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("tj_build_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    setenv("TJ_CACHE_DIR", dir_.c_str(), 1);
    auto c = find_compiler();
    ASSERT_TRUE(c) << "no C++ compiler";
    cxx_ = *c;
  }
  void TearDown() override {
    unsetenv("TJ_CACHE_DIR");
    fs::remove_all(dir_);
  }
  static int call(const BuildResult& r) { return reinterpret_cast<int (*)()>(r.library->symbol("tj_answer"))(); }

  fs::path dir_;
  Compiler cxx_;
};

const std::string kSource = "extern \"C\" int tj_answer() { return 42; }\n";

TEST_F(BuildTest, MissThenHit) {
  BuildResult a = build_library(kSource, cxx_);
  EXPECT_FALSE(a.cache_hit);
  EXPECT_GT(a.compile_seconds, 0);
  EXPECT_EQ(call(a), 42);
  BuildResult b = build_library(kSource, cxx_);
  EXPECT_TRUE(b.cache_hit);
  EXPECT_EQ(b.compile_seconds, 0);
  EXPECT_EQ(b.key, a.key);
  EXPECT_EQ(call(b), 42);
  // Other flags, other entry.
  BuildResult c = build_library(kSource, cxx_, {"-O1", "-shared", "-fPIC"});
  EXPECT_FALSE(c.cache_hit);
  EXPECT_NE(c.key, a.key);
  EXPECT_TRUE(fs::exists(a.source_path));
}

TEST_F(BuildTest, TruncatedEntryIsRebuilt) {
  BuildResult a = build_library(kSource, cxx_);
  fs::path lib = a.library->path();
  a.library.reset();
  fs::resize_file(lib, fs::file_size(lib) / 2);
  BuildResult b = build_library(kSource, cxx_);
  EXPECT_FALSE(b.cache_hit);
  EXPECT_EQ(call(b), 42);
}

TEST_F(BuildTest, EntryWithoutSidecarIsRebuilt) {
  BuildResult a = build_library(kSource, cxx_);
  fs::path lib = a.library->path();
  fs::remove(fs::path(lib).replace_extension(".ok"));
  BuildResult b = build_library(kSource, cxx_);
  EXPECT_FALSE(b.cache_hit);
  EXPECT_EQ(call(b), 42);
}

TEST_F(BuildTest, CompileErrorsCarryDiagnostics) {
  try {
    build_library("this is not C++\n", cxx_);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compiling generated code failed"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("error"), std::string::npos);
  }
  // Nothing half-written is left to be mistaken for an entry.
  for (const auto& f : fs::directory_iterator(dir_ / "kernels")) EXPECT_NE(f.path().extension(), ".so");
}

TEST_F(BuildTest, MissingCompilerIsReported) {
  setenv("TJ_CXX", "/nonexistent/c++", 1);
  EXPECT_FALSE(find_compiler());
  unsetenv("TJ_CXX");
  EXPECT_TRUE(find_compiler());
}

}  // namespace
}  // namespace tj
