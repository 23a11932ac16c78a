// The program cache: an unchanged graph, weights and options hit without
// running the passes; a changed weight, option or graph misses; a corrupt
// entry is rebuilt; results match the interpreter either way.
#include "compiler/compile.h"
#include "compiler/program_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "models/llama.h"
#include "passes/pipeline.h"
#include "reference/random_inputs.h"
#include "support/paths.h"

namespace tj {
namespace {

namespace fs = std::filesystem;

class ProgramCache : public ::testing::Test {
 protected:
  void SetUp() override {
    static const std::string base = [] {
      const char* b = std::getenv("TJ_CACHE_DIR");
      return std::string(b && *b ? b : ::testing::TempDir());
    }();
    dir_ = fs::path(base) / ("tj_program_cache_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    setenv("TJ_CACHE_DIR", dir_.c_str(), 1);
    g_ = models::trace_mlp(models::llama_config("tiny"), {1, 3, 3, DType::f32});
    RandomInputOptions ro;
    ro.seed = 5;
    for (auto& [k, v] : random_inputs(g_, ro)) (g_.node(g_.find(k)).op == Op::param ? params_ : inputs_)[k] = std::move(v);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static bool ran_passes(const Executable& e) {
    for (const auto& [name, s] : e.stats().stage_seconds)
      if (name == "passes") return true;
    return false;
  }
  // Runs `e` and checks it against the interpreter with `params`.
  void expect_right(Executable& e, const Bindings& params) {
    Bindings all = params, in = inputs_;
    for (const auto& [k, v] : inputs_) all[k] = v;
    Difference d = compare_outputs(e.run(in), interpret(g_, all, {DType::f32}));
    EXPECT_LE(d.max_rel, 1e-5);
  }
  std::vector<fs::path> entries(const std::string& ext) const {
    std::vector<fs::path> r;
    if (fs::exists(dir_ / "programs"))
      for (const auto& f : fs::directory_iterator(dir_ / "programs"))
        if (f.path().extension() == ext) r.push_back(f.path());
    return r;
  }

  fs::path dir_;
  Graph g_;
  Bindings params_, inputs_;
};

TEST_F(ProgramCache, UnchangedHitsWithoutPasses) {
  Executable a = tj::compile(g_, params_);
  EXPECT_FALSE(a.stats().program_cache_hit);
  EXPECT_TRUE(ran_passes(a));
  Executable b = tj::compile(g_, params_);
  EXPECT_TRUE(b.stats().program_cache_hit);
  EXPECT_FALSE(ran_passes(b));
  EXPECT_TRUE(b.stats().cache_hit);  // the same source: the kernel library too
  EXPECT_EQ(a.source(), b.source());
  expect_right(a, params_);
  expect_right(b, params_);
  EXPECT_EQ(entries(".bin").size(), 1u);
}

TEST_F(ProgramCache, ChangedWeightOptionOrGraphMisses) {
  tj::compile(g_, params_);
  // One weight, one element.
  Bindings changed = params_;
  NDArray& w = changed.begin()->second;
  w.set(0, w.get(0) + 1.0);
  Executable a = tj::compile(g_, changed);
  EXPECT_FALSE(a.stats().program_cache_hit);
  expect_right(a, changed);
  // An option.
  CompileOptions no_reorder;
  no_reorder.reorder = false;
  EXPECT_FALSE(tj::compile(g_, params_, no_reorder).stats().program_cache_hit);
  CompileOptions hinted;
  hinted.size_hint["T"] = 7;
  EXPECT_FALSE(tj::compile(g_, params_, hinted).stats().program_cache_hit);
  // Another graph with the same weights.
  Graph longer = models::trace_mlp(models::llama_config("tiny"), {1, 4, 4, DType::f32});
  EXPECT_FALSE(tj::compile(longer, params_).stats().program_cache_hit);
  // And the first again: still there.
  EXPECT_TRUE(tj::compile(g_, params_).stats().program_cache_hit);
  EXPECT_TRUE(tj::compile(g_, changed).stats().program_cache_hit);
}

// Past TJ_CACHE_MAX_MB the least recently used entries go: with a 1 MB
// limit and three programs of 352 KB of constants each, the first to be
// used is evicted when the third is stored; a hit counts as a use.
TEST_F(ProgramCache, LeastRecentlyUsedEntriesAreEvicted) {
  setenv("TJ_CACHE_MAX_MB", "1", 1);
  auto variant = [&](double bump) {
    Bindings p = params_;
    NDArray& w = p.begin()->second;
    w.set(0, w.get(0) + bump);
    return p;
  };
  Bindings a = variant(1), b = variant(2), c = variant(3);
  tj::compile(g_, a);
  tj::compile(g_, b);
  EXPECT_TRUE(tj::compile(g_, a).stats().program_cache_hit);  // a is now the more recent
  tj::compile(g_, c);                                          // over 1 MB: b goes
  EXPECT_EQ(entries(".bin").size(), 2u);
  EXPECT_TRUE(tj::compile(g_, a).stats().program_cache_hit);
  EXPECT_TRUE(tj::compile(g_, c).stats().program_cache_hit);
  Executable again = tj::compile(g_, b);
  EXPECT_FALSE(again.stats().program_cache_hit);
  expect_right(again, b);
  unsetenv("TJ_CACHE_MAX_MB");
}

TEST_F(ProgramCache, CorruptEntriesAreRebuilt) {
  tj::compile(g_, params_);
  EXPECT_TRUE(tj::compile(g_, params_).stats().program_cache_hit);  // its data file is trusted now (.seen)
  ASSERT_EQ(entries(".bin").size(), 1u);
  ASSERT_EQ(entries(".seen").size(), 1u);
  fs::path bin = entries(".bin")[0], text = entries(".tj")[0];
  {  // one flipped bit in the constants, the modification time put back
    auto when = fs::last_write_time(bin);
    std::fstream f(bin, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    char c;
    f.read(&c, 1);
    c ^= 1;
    f.seekp(100);
    f.write(&c, 1);
    f.close();
    fs::last_write_time(bin, when);
  }
  Executable a = tj::compile(g_, params_);
  EXPECT_FALSE(a.stats().program_cache_hit);
  expect_right(a, params_);
  EXPECT_TRUE(tj::compile(g_, params_).stats().program_cache_hit);  // rebuilt
  EXPECT_TRUE(tj::compile(g_, params_).stats().program_cache_hit);  // and trusted
  fs::resize_file(text, fs::file_size(text) / 2);
  Executable b = tj::compile(g_, params_);
  EXPECT_FALSE(b.stats().program_cache_hit);
  expect_right(b, params_);
  fs::remove(entries(".ok")[0]);
  EXPECT_FALSE(tj::compile(g_, params_).stats().program_cache_hit);
}

TEST_F(ProgramCache, CanBeTurnedOff) {
  CompileOptions off;
  off.program_cache = false;
  Executable a = tj::compile(g_, params_, off);
  Executable b = tj::compile(g_, params_, off);
  EXPECT_FALSE(b.stats().program_cache_hit);
  EXPECT_TRUE(ran_passes(b));
  EXPECT_TRUE(entries(".bin").empty());
  expect_right(b, params_);
}

}  // namespace
}  // namespace tj
