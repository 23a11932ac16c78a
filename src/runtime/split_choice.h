// Whether a decode-sized program splits its small kernels (GEMVs and
// attentions of a few microseconds each) over the thread pool: measured on
// the program's own calls, not guessed.
//
// Splitting pays where a GEMV's halves take longer than handing them to
// another core and its results back, and loses where they do not. On this
// project's 2-vCPU Xeon the tiny layer's decode step took 7.2 us on one
// thread and 14.6-15.1 us split, quiet: every split kernel moves the step's
// activations between the two cores' caches (the unsplit kernel that reads
// a split GEMV's output took 0.82 us after it, 0.24-0.30 us after an
// unsplit one), while the same GEMV alone, its data in place, ran in 3.8-4.4
// us split against 5.9. On a busy machine a descheduled worker also costs
// the part it holds (beside one compile job: 11.2-12.4 us split, 7.1-9.1 on
// one thread). So the program alternates the two ways for a few calls, keeps
// the faster (median per call), and measures again every few thousand calls,
// since the machine's load changes. Both ways give the same bits (a split
// never changes a sum's order), so the choice changes only the time.
//
//   SplitChoice c;
//   bool split = c.next();   // before a call
//   ...                       // the call
//   c.record(seconds);        // after it, when timing() was true
#pragma once

#include <cstdint>
#include <vector>

namespace tj {

class SplitChoice {
 public:
  static constexpr int kProbeCalls = 16;        // calls in each way per measurement
  static constexpr int kWarmupCalls = 2;        // not timed: caches and pages still cold
  static constexpr int64_t kExploitCalls = 4096;  // calls between measurements

  // The way to run the next call (true: split).
  bool next();
  // Whether the call just announced by next() is to be timed.
  bool timing() const { return probing_ && calls_ > kWarmupCalls; }
  void record(double seconds);
  // The current choice (true: split), for reports.
  bool choice() const { return choice_; }

 private:
  int64_t calls_ = 0;
  int64_t since_probe_ = 0;
  bool probing_ = true;
  bool choice_ = true;
  bool current_ = true;
  std::vector<double> times_[2];  // [one thread, split]
};

}  // namespace tj
