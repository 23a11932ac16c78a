#include "runtime/split_choice.h"

#include "support/timing.h"

namespace tj {

bool SplitChoice::next() {
  ++calls_;
  if (!probing_ && ++since_probe_ >= kExploitCalls) {  // measure again
    probing_ = true;
    times_[0].clear(), times_[1].clear();
  }
  current_ = probing_ ? (calls_ % 2 == 0) : choice_;  // alternate while measuring
  return current_;
}

void SplitChoice::record(double seconds) {
  times_[current_ ? 1 : 0].push_back(seconds);
  if (times_[0].size() < kProbeCalls || times_[1].size() < kProbeCalls) return;
  choice_ = quantile(times_[1], 0.5) <= quantile(times_[0], 0.5);
  probing_ = false;
  since_probe_ = 0;
}

}  // namespace tj
