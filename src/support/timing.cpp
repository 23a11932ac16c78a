#include "support/timing.h"

#include <algorithm>
#include <cmath>

namespace tj {

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const auto k = static_cast<size_t>(std::lround(std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1)));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

Timing summarize(std::vector<double> seconds) {
  Timing r;
  if (seconds.empty()) return r;
  std::sort(seconds.begin(), seconds.end());
  auto at = [&](double q) { return seconds[static_cast<size_t>(std::lround(q * static_cast<double>(seconds.size() - 1)))]; };
  r.min = seconds.front(), r.median = at(0.5), r.p90 = at(0.9), r.p99 = at(0.99), r.max = seconds.back();
  r.calls = seconds.size();
  return r;
}

}  // namespace tj
