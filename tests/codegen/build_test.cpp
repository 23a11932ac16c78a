// Build and load through the compile cache: misses, hits, corrupt and
// truncated entries, compile errors, a missing or broken compiler, a wrapper
// script as the compiler, an unwritable cache folder.
#include <gtest/gtest.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <csignal>
#include <unistd.h>

#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include "codegen/cpp/build.h"
#include "support/files.h"
#include "compiler/compile.h"
#include "models/llama.h"
#include "reference/random_inputs.h"
#include "tensorjit/error.h"

namespace tj {
namespace {

namespace fs = std::filesystem;

class BuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Inside the build tree's test cache when CTest runs us (never the user's).
    // The base is read once: TearDown unsets the variable for the next test.
    static const std::string base = [] {
      const char* b = std::getenv("TJ_CACHE_DIR");
      return std::string(b && *b ? b : ::testing::TempDir());
    }();
    dir_ = fs::path(base) / ("tj_build_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    setenv("TJ_CACHE_DIR", dir_.c_str(), 1);
    // A private folder for an unwritable cache goes here too.
    setenv("TMPDIR", dir_.c_str(), 1);
    auto c = find_compiler();
    ASSERT_TRUE(c) << "no C++ compiler";
    cxx_ = *c;
  }
  void TearDown() override {
    unsetenv("TJ_CACHE_DIR");
    unsetenv("TMPDIR");
    unsetenv("TJ_CXX");
    fs::remove_all(dir_);
  }
  // An executable shell script in dir_.
  fs::path script(const std::string& name, const std::string& body) {
    fs::path p = dir_ / name;
    std::ofstream(p) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(p, fs::perms::owner_all);
    return p;
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

// The kernel folder is held under TJ_CACHE_MAX_MB: a new library pushes
// out the least recently used files, oldest first, until the folder fits
// (here the older of two stale 600 KB files), never itself, and not a
// library that was just hit.
TEST_F(BuildTest, LeastRecentlyUsedLibrariesAreEvicted) {
  setenv("TJ_CACHE_MAX_MB", "1", 1);
  BuildResult used = build_library(kSource, cxx_);
  fs::path kernels = fs::path(used.library->path()).parent_path();
  const auto now = fs::file_time_type::clock::now();
  for (int age : {2, 1}) {
    fs::path f = kernels / ("stale" + std::to_string(age) + ".so");
    std::ofstream(f, std::ios::binary) << std::string(600 * 1024, 'x');
    fs::last_write_time(f, now - std::chrono::hours(24 * age));
  }
  EXPECT_TRUE(build_library(kSource, cxx_).cache_hit);  // a hit: touched, the most recent
  BuildResult fresh = build_library("extern \"C\" int tj_answer() { return 7; }\n", cxx_);
  EXPECT_FALSE(fresh.cache_hit);
  EXPECT_EQ(call(fresh), 7);
  EXPECT_FALSE(fs::exists(kernels / "stale2.so"));  // the oldest
  EXPECT_TRUE(fs::exists(kernels / "stale1.so"));   // the folder fits without removing it
  EXPECT_TRUE(fs::exists(fresh.library->path()));
  EXPECT_TRUE(build_library(kSource, cxx_).cache_hit);
  unsetenv("TJ_CACHE_MAX_MB");
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
  auto libraries = [&] {  // the probe's entry may be there already
    std::set<fs::path> r;
    if (!fs::exists(dir_ / "kernels")) return r;
    for (const auto& f : fs::directory_iterator(dir_ / "kernels")) r.insert(f.path());
    return r;
  };
  std::set<fs::path> before = libraries();
  try {
    build_library("this is not C++\n", cxx_);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compiling generated code failed"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("error"), std::string::npos);
  }
  // Nothing half-written is left to be mistaken for an entry.
  for (const auto& f : libraries()) {
    if (!before.count(f)) {
      EXPECT_NE(f.extension(), ".so") << f;
    }
  }
}

// Marked sources split into units: the text before the first mark and after
// the last in each, the pieces between in order, cut by size.
TEST(TranslationUnits, SplitAtMarks) {
  const std::string m = kUnitMark;
  const std::string src = "H\n" + m + "a\n" + m + "bbbb\n" + m + "c\n" + m + "T\n";
  EXPECT_EQ(translation_units(src, 1), std::vector<std::string>{src});
  EXPECT_EQ(translation_units("no marks\n", 4), std::vector<std::string>{"no marks\n"});
  EXPECT_EQ(translation_units(src, 2), (std::vector<std::string>{"H\na\nbbbb\nT\n", "H\nc\nT\n"}));
  EXPECT_EQ(translation_units(src, 8), (std::vector<std::string>{"H\na\nT\n", "H\nbbbb\nT\n", "H\nc\nT\n"}));
  const std::string one = "H\n" + m + "a\n" + m + "T\n";  // a single piece: nothing to split
  EXPECT_EQ(translation_units(one, 4), std::vector<std::string>{one});
}

// Units compiled apart link into one library (a function calls one from
// another unit); a unit that fails reports the compiler's error and leaves
// no unit files behind.
TEST_F(BuildTest, MarkedSourcesBuildInUnits) {
  const std::string m = kUnitMark;
  const std::string head = "extern \"C\" int tj_one();\n";
  BuildResult r = build_library(head + m + "extern \"C\" int tj_one() { return 40; }\n" + m +
                                    "extern \"C\" int tj_answer() { return tj_one() + 2; }\n" + m,
                                cxx_);
  EXPECT_EQ(call(r), 42);
  try {
    build_library(head + m + "extern \"C\" int tj_one() { return 40; }\n" + m + "this is not C++\n" + m, cxx_);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compiling generated code failed"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("error"), std::string::npos);
  }
  for (const auto& f : fs::directory_iterator(dir_ / "kernels"))
    EXPECT_EQ(f.path().string().find(".u"), std::string::npos) << f.path();
}

// A process that takes signals without SA_RESTART (libFuzzer's timer, a
// profiler) interrupts the read of the compiler's output. That must not cut
// the output short: the compiler would then write into a closed pipe and die
// of SIGPIPE (g++ exits with status 2 and prints nothing; found by fuzzing).
TEST_F(BuildTest, SignalsDuringCompileAreHarmless) {
  struct sigaction sa = {}, old_sa = {};
  sa.sa_handler = [](int) {};
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART
  ASSERT_EQ(sigaction(SIGALRM, &sa, &old_sa), 0);
  itimerval every_ms = {{0, 1000}, {0, 1000}}, off = {}, old_timer = {};
  ASSERT_EQ(setitimer(ITIMER_REAL, &every_ms, &old_timer), 0);
  // The warning comes after the headers' parse, long after the read began.
  const std::string warns = "#include <map>\n#include <regex>\n#warning late\n" + kSource;
  std::string failure;
  try {
    EXPECT_EQ(call(build_library(warns, cxx_)), 42);
    build_library("#include <map>\n#include <regex>\nthis is not C++\n", cxx_);
    failure = "no error";
  } catch (const Error& e) {
    failure = e.what();
  }
  setitimer(ITIMER_REAL, &off, nullptr);
  sigaction(SIGALRM, &old_sa, nullptr);
  EXPECT_NE(failure.find("this is not C++"), std::string::npos) << failure;  // the diagnostics, whole
}

TEST_F(BuildTest, MissingCompilerIsReported) {
  setenv("TJ_CXX", "/nonexistent/c++", 1);
  EXPECT_FALSE(find_compiler());
  unsetenv("TJ_CXX");
  EXPECT_TRUE(find_compiler());
}

// A wrapper that adds a flag prints the same --version as the compiler it
// runs; its library must not be mistaken for the plain compiler's.
TEST_F(BuildTest, WrapperScriptIsAnotherCompiler) {
  const std::string source =
      "#ifdef TJ_WRAPPED\nextern \"C\" int tj_answer() { return 7; }\n"
      "#else\nextern \"C\" int tj_answer() { return 42; }\n#endif\n";
  BuildResult plain = build_library(source, cxx_);
  EXPECT_EQ(call(plain), 42);
  fs::path wrapper = script("wrapped-c++", "exec '" + cxx_.executable + "' -DTJ_WRAPPED \"$@\"");
  setenv("TJ_CXX", wrapper.c_str(), 1);
  auto w = find_compiler();
  ASSERT_TRUE(w);
  EXPECT_EQ(w->executable, fs::canonical(wrapper).string());
  EXPECT_NE(w->identity, cxx_.identity);
  BuildResult wrapped = build_library(source, *w);
  EXPECT_NE(wrapped.key, plain.key);
  EXPECT_FALSE(wrapped.cache_hit);
  EXPECT_EQ(call(wrapped), 7);
}

// A warm start does not run `--version` again: it is remembered under the
// executable's file identity, and run again once the file changes.
TEST_F(BuildTest, VersionIsRememberedUntilTheExecutableChanges) {
  fs::path calls = dir_ / "version-calls";
  auto wrapper_body = [&](const std::string& tag) {
    return "[ \"$1\" = --version ] && echo x >> '" + calls.string() + "'\nexec '" + cxx_.executable + "' \"$@\"  # " + tag;
  };
  fs::path wrapper = script("counted-c++", wrapper_body("one"));
  auto count = [&] {
    std::ifstream f(calls);
    int n = 0;
    for (std::string line; std::getline(f, line);) ++n;
    return n;
  };
  std::string why;
  auto a = probe_compiler(wrapper.string(), &why);
  ASSERT_TRUE(a) << why;
  EXPECT_EQ(count(), 1);
  auto b = probe_compiler(wrapper.string(), &why);
  ASSERT_TRUE(b) << why;
  EXPECT_EQ(count(), 1) << "--version ran again for an unchanged executable";
  EXPECT_EQ(a->identity, b->identity);
  script("counted-c++", wrapper_body("two"));  // another file: its version is asked again
  auto c = probe_compiler(wrapper.string(), &why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(count(), 2);
  EXPECT_NE(c->identity, a->identity);  // the executable's hash differs
}

TEST_F(BuildTest, IdentityIsTheWholeVersionAndTheExecutable) {
  EXPECT_FALSE(cxx_.executable.empty());
  EXPECT_TRUE(fs::path(cxx_.executable).is_absolute());
  EXPECT_FALSE(fs::is_symlink(cxx_.executable));
  EXPECT_NE(cxx_.identity.find('\n'), std::string::npos);  // more than the first line
  EXPECT_NE(cxx_.identity.find("executable "), std::string::npos);
}

// /bin/true answers --version and exits 0 on anything: the probe, not a late
// "cannot install" at the first real compile, must reject it.
TEST_F(BuildTest, NonCompilerFailsTheProbe) {
  setenv("TJ_CXX", "/bin/true", 1);
  ::testing::internal::CaptureStderr();
  auto c = find_compiler();
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(c);
  EXPECT_NE(err.find("/bin/true ($TJ_CXX) is not used"), std::string::npos) << err;
  EXPECT_NE(err.find("wrote no library"), std::string::npos) << err;
  // Once per process: no second warning.
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(find_compiler());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST_F(BuildTest, NonCompilerRunsOnTheInterpreter) {
  const auto& c = models::llama_config("tiny");
  Graph g = models::trace_mlp(c, {1, 3, 3, DType::f32});
  Bindings all = random_inputs(g, 2), params, inputs;
  for (const auto& [k, v] : all) (g.node(g.find(k)).op == Op::param ? params : inputs)[k] = v;
  setenv("TJ_CXX", "/bin/true", 1);
  ::testing::internal::CaptureStderr();
  Executable exe = tj::compile(g, params);
  ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(exe.stats().compiled);
  EXPECT_EQ(exe.run(inputs).size(), g.outputs().size());
}

// A compiler that fails the probe's flags (here: it rejects -fopenmp-simd).
TEST_F(BuildTest, CompilerFailingTheRealFlagsIsNotUsed) {
  fs::path picky = script("picky-c++", "for a; do [ \"$a\" = -fopenmp-simd ] && { echo 'no OpenMP' >&2; exit 1; }; done\n"
                                       "exec '" + cxx_.executable + "' \"$@\"");
  setenv("TJ_CXX", picky.c_str(), 1);
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(find_compiler());
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("no OpenMP"), std::string::npos) << err;
}

// An unwritable cache folder is not an error: one warning, then a private
// folder; an entry already in the folder is still used.
TEST_F(BuildTest, UnwritableCacheStillCompiles) {
  for (std::string bad : {std::string("/proc/tj-unwritable"), (dir_ / "a-file" / "cache").string()}) {
    std::ofstream(dir_ / "a-file") << "not a folder\n";
    setenv("TJ_CACHE_DIR", bad.c_str(), 1);
    ::testing::internal::CaptureStderr();
    BuildResult a = build_library(kSource, cxx_);
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_FALSE(a.cache_hit);
    EXPECT_EQ(call(a), 42);
    EXPECT_EQ(a.source_path.rfind(dir_.string() + "/tensorjit-", 0), 0u) << a.source_path;
    EXPECT_NE(err.find("cannot be written"), std::string::npos) << err;
    ::testing::internal::CaptureStderr();
    BuildResult b = build_library(kSource, cxx_);
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");  // warned once
    EXPECT_TRUE(b.cache_hit);
    EXPECT_TRUE(find_compiler());  // the probe builds there too
  }
}

TEST_F(BuildTest, PrivateFolderIsRemovedAtExit) {
  fs::path report = dir_ / "child-source-path";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("TJ_CACHE_DIR", "/proc/tj-unwritable-child", 1);
    int rc = 1;
    try {
      ::testing::internal::CaptureStderr();
      BuildResult a = build_library(kSource, cxx_);
      std::ofstream(report) << a.source_path;
      rc = call(a) == 42 ? 0 : 1;
    } catch (...) {
    }
    std::exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::string src;
  std::ifstream(report) >> src;
  fs::path priv = fs::path(src).parent_path().parent_path();
  EXPECT_EQ(priv.filename().string().rfind("tensorjit-", 0), 0u) << src;
  EXPECT_FALSE(fs::exists(priv)) << priv;
}

// Programs that start with the standard headers (kStdIncludes) are built
// with them precompiled: once per compiler, CPU and flags, into the cache's
// pch/, checked by a sidecar as entries are. A corrupt one is built again
// by the next process; one the compiler fails on is left for a build
// without it, and its sidecar removed.
TEST_F(BuildTest, StandardHeadersArePrecompiledOnceAndChecked) {
  if (cxx_.identity.find("Free Software Foundation") == std::string::npos) GTEST_SKIP() << "not GCC: no precompiled headers";
  auto source = [](int answer) {
    return std::string("// a program\n") + kStdIncludes + "extern \"C\" int tj_answer() { return (int)std::max(std::sqrt(" +
           std::to_string(answer * answer) + ".0), 0.0); }\n";
  };
  EXPECT_EQ(call(build_library(source(42), cxx_)), 42);
  std::vector<fs::path> made;
  for (const auto& e : fs::directory_iterator(dir_ / "pch")) made.push_back(e.path());
  ASSERT_EQ(made.size(), 1u);
  const fs::path gch = made[0] / "tj_std.h.gch", ok = made[0] / "tj_std.h.ok";
  ASSERT_TRUE(fs::exists(gch) && fs::exists(ok));
  const auto size = fs::file_size(gch);
  const auto when = fs::last_write_time(gch);
  EXPECT_EQ(call(build_library(source(43), cxx_)), 43);  // the same one
  EXPECT_EQ(fs::last_write_time(gch), when);
  // In a new process (this one remembers it as good): truncated, it is
  // built again; truncated with a sidecar that matches, GCC cannot read it,
  // and the program is built without it.
  auto in_child = [&](int answer) {
    const pid_t pid = fork();
    if (pid == 0) _exit(call(build_library(source(answer), cxx_)) == answer ? 0 : 1);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  };
  fs::resize_file(gch, size / 2);
  EXPECT_TRUE(in_child(44));
  EXPECT_GT(fs::file_size(gch), size * 3 / 4);  // whole again (not byte for byte: it names its temporary file)
  fs::resize_file(gch, size / 2);
  std::ifstream f(gch, std::ios::binary);
  const std::string half((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::ofstream(ok, std::ios::trunc) << hash_hex(half.data(), half.size()) << " " << half.size() << "\n";
  EXPECT_TRUE(in_child(45));
  EXPECT_FALSE(fs::exists(ok));
  // A program without them (the probe's kind) is built as it is.
  EXPECT_EQ(call(build_library(kSource, cxx_)), 42);
}

TEST_F(BuildTest, GarbageEntryIsRebuilt) {
  BuildResult a = build_library(kSource, cxx_);
  a.library.reset();
  fs::path lib = dir_ / "kernels" / (a.key + ".so");
  { std::ofstream(lib, std::ios::binary | std::ios::trunc) << "garbage"; }
  BuildResult b = build_library(kSource, cxx_);
  EXPECT_FALSE(b.cache_hit);
  EXPECT_EQ(call(b), 42);
}

}  // namespace
}  // namespace tj
