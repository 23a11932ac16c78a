// The bench library (src/bench) and the timing module every measurement
// uses (support/timing.h): the statistics exact on known samples, the
// model specs the benchmarks run, and their arguments' errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <thread>

#include "bench/args.h"
#include "bench/model.h"
#include "support/timing.h"
#include "tensorjit/error.h"

namespace tj {
namespace {

TEST(Timing, QuantilesByNearestRank) {
  std::vector<double> v(101);
  std::iota(v.begin(), v.end(), 0.0);
  std::reverse(v.begin(), v.end());  // any order
  EXPECT_EQ(quantile(v, 0.5), 50);
  EXPECT_EQ(quantile(v, 0.9), 90);
  EXPECT_EQ(quantile(v, 0), 0);
  EXPECT_EQ(quantile(v, 1), 100);
  EXPECT_EQ(quantile({3, 1, 4, 2}, 0.5), 3);  // an even count: the upper middle
  EXPECT_EQ(quantile({}, 0.5), 0);
  Timing t = summarize(v);
  EXPECT_EQ(t.min, 0);
  EXPECT_EQ(t.median, 50);
  EXPECT_EQ(t.p90, 90);
  EXPECT_EQ(t.p99, 99);
  EXPECT_EQ(t.max, 100);
  EXPECT_EQ(t.calls, 101u);
  EXPECT_EQ(summarize({}).calls, 0u);
}

TEST(Timing, CallsAtLeastTheMinimumAndStopAtTheBudget) {
  int calls = 0;
  Timing t = time_calls([&] { ++calls; }, 7, 0);
  EXPECT_EQ(calls, 7);
  EXPECT_EQ(t.calls, 7u);
  EXPECT_LE(t.min, t.median);
  EXPECT_LE(t.median, t.max);
  calls = 0;
  const auto t0 = Clock::now();
  time_calls([&] { ++calls, std::this_thread::sleep_for(std::chrono::milliseconds(1)); }, 1, 0.02);
  EXPECT_GE(seconds_since(t0), 0.02);
  EXPECT_GT(calls, 1);
  EXPECT_LT(calls, 25);
}

TEST(BenchModel, SpecsTraceAndMakeInputs) {
  bench::ModelSpec s;
  s.mode = "decode";
  s.kv_len = "8";
  bench::Model m = bench::make_model(s);
  EXPECT_EQ(m.graph.type(m.graph.find("k_cache")).str(), "f32[1,2,8,16]");
  EXPECT_EQ(m.inputs.at("pos").data<int64_t>()[0], 7);  // decode at the cache's last row
  EXPECT_TRUE(m.params.count("rope_cos"));
  // The options that give the spec again, for a fresh process.
  std::vector<std::string> argv = bench::spec_argv(s);
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--kv-len"), argv.end());
  s.mode = "sideways";
  EXPECT_THROW(bench::trace_model(s), Error);
  s.mode = "prefill";
  s.tokens = "9";
  s.kv_len = "4";
  try {
    bench::trace_model(s);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--kv-len 4 cannot hold 9 tokens");
  }
}

TEST(BenchArgs, ValuesFromTextAreChecked) {
  EXPECT_EQ(bench::size_arg("12", "--sym T"), 12);
  auto err = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(err([] { bench::size_arg("1e3", "--sym T"); }), "--sym T: '1e3' is not a non-negative integer <= 1099511627776");
  EXPECT_EQ(err([] { bench::split_eq("T", "--sym"); }), "--sym expects NAME=VALUE, got 'T'");
  EXPECT_EQ(err([] { bench::parse_number("one", "--set x"); }), "--set x: 'one' is not a number");
  NDArray a(DType::i32, {1});
  EXPECT_EQ(err([&] { bench::set_element(a, 0, "3000000000", "x"); }), "x (i32): '3000000000' is not an integer <= 2147483647 and >= -2147483648");
  bench::set_element(a, 0, "-5", "x");
  EXPECT_EQ(a.data<int32_t>()[0], -5);
}

}  // namespace
}  // namespace tj
