// Background load and fresh processes for benchmarks (tjc bench --busy,
// --repeat): what a user's machine does while the model runs. Timing and
// its statistics: support/timing.h.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace tj::bench {

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

}  // namespace tj::bench
