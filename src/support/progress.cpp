#include "support/progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <system_error>

#include "support/log.h"
#include "support/timing.h"

namespace tj {

bool Progress::wanted() {
  static const bool tty = isatty(STDERR_FILENO) == 1;
  return tty || log_enabled("progress");
}

Progress::Progress(std::string what, std::string detail, double quiet_for, double every)
    : what_(std::move(what)), detail_(std::move(detail)) {
  if (!wanted()) return;
  const auto start = Clock::now();
  try {
    watcher_ = std::thread([this, start, quiet_for, every] {
      std::unique_lock<std::mutex> lock(mu_);
      double next = quiet_for;
      while (!cv_.wait_until(lock, start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(next)), [&] { return done_; })) {
        std::fprintf(stderr, "[tensorjit] %s: %s, %.0f s\n", what_.c_str(), detail_.c_str(), seconds_since(start));
        printed_ = true;
        next += every;
      }
      if (printed_) std::fprintf(stderr, "[tensorjit] %s: %s, done in %.1f s\n", what_.c_str(), detail_.c_str(), seconds_since(start));
    });
  } catch (const std::system_error&) {  // no thread to be had: no progress lines
  }
}

Progress::~Progress() {
  if (!watcher_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  watcher_.join();
}

}  // namespace tj
