// Wall-clock timing and its statistics: the one module that the autotuner,
// the split choice, Executable::profile and the benchmarks (src/bench) all
// measure with, so that a "median" or a "p90" means the same everywhere.
//
//   Timing t = time_calls([&] { exe.run(in, out); }, 10, 2.0);  // >= 10 calls, ~2 s
//   std::printf("%.1f us (p90 %.1f)\n", t.median * 1e6, t.p90 * 1e6);
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

namespace tj {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The q-quantile of `v` (0 <= q <= 1) by nearest rank: the element at
// round(q·(n-1)) of v sorted; the median of an even count is the upper
// middle. 0 for an empty vector.
double quantile(std::vector<double> v, double q);

// Per-call times of one measurement, in seconds.
struct Timing {
  double min = 0, median = 0, p90 = 0, p99 = 0, max = 0;
  size_t calls = 0;
};
// The quantiles of `seconds` (empty: zeros).
Timing summarize(std::vector<double> seconds);

// The seconds of each call of `f`: at least `min_runs` calls, then more
// until `budget` seconds have passed (at most 100000).
template <class F>
std::vector<double> call_seconds(F&& f, int min_runs, double budget) {
  std::vector<double> t;
  const auto start = Clock::now();
  while (static_cast<int>(t.size()) < min_runs || (seconds_since(start) < budget && t.size() < 100000)) {
    const auto t0 = Clock::now();
    f();
    t.push_back(seconds_since(t0));
  }
  return t;
}
template <class F>
Timing time_calls(F&& f, int min_runs, double budget) {
  return summarize(call_seconds(f, min_runs, budget));
}

}  // namespace tj
