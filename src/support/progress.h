// Progress on work that may take a while: a Progress made when the work
// starts says nothing if the work ends within `quiet_for` seconds (2 by
// default); past that it prints "[tensorjit] WHAT: DETAIL, T s" to stderr,
// again every `every` seconds, and once more with the total when it ends.
// It prints where someone is watching: when stderr is a terminal, or with
// TJ_LOG=progress (or all); never in between two lines of another writer
// (each line is written with one call).
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace tj {

class Progress {
 public:
  Progress(std::string what, std::string detail, double quiet_for = 2.0, double every = 5.0);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Whether progress lines print in this process (stderr a terminal, or TJ_LOG=progress).
  static bool wanted();

 private:
  std::string what_, detail_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false, printed_ = false;
  std::thread watcher_;
};

}  // namespace tj
