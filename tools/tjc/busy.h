// Background load and fresh processes for benchmarks (tjc bench --busy,
// --repeat): what a user's machine does while the model runs.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace tjc {

// When this process started (static initialization, before main).
extern const std::chrono::steady_clock::time_point process_start;

// N jobs that behave like a parallel build: each compiles a C++ file with
// the system compiler over and over (short-lived, CPU- and memory-heavy
// processes), in a process group of its own. They stop when this object is
// destroyed, when this process dies, and after `max_seconds` in any case.
class BusyLoad {
 public:
  BusyLoad(int jobs, double max_seconds, const std::string& folder);
  ~BusyLoad();
  BusyLoad(const BusyLoad&) = delete;
  BusyLoad& operator=(const BusyLoad&) = delete;

 private:
  std::vector<pid_t> groups_;
};

// Runs this tjc executable with `args` in a fresh process and returns its
// standard output (its standard error is ours); a non-zero exit is a tj::Error.
std::string run_self(const std::vector<std::string>& args);

// Per-call times of one measurement, in seconds.
struct Timing {
  double median = 0, p90 = 0, p99 = 0, max = 0;
  size_t calls = 0;
};
// Sorts `t` and summarizes it (empty: zeros).
Timing summarize(std::vector<double> t);

// The seconds of each call of `f`: at least `min_runs`, and until `budget` seconds.
template <class F>
std::vector<double> call_seconds(F f, int min_runs, double budget) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> t;
  auto start = Clock::now();
  auto since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  while (static_cast<int>(t.size()) < min_runs || (since(start) < budget && t.size() < 100000)) {
    auto t0 = Clock::now();
    f();
    t.push_back(since(t0));
  }
  return t;
}
template <class F>
Timing time_calls(F f, int min_runs, double budget) {
  return summarize(call_seconds(f, min_runs, budget));
}

}  // namespace tjc
