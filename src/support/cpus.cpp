#include "support/cpus.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace tj {

namespace {

// The CPU count a cgroup quota allows ("max" or no file: none), or 0.
int quota_cpus(const std::string& quota, const std::string& period) {
  if (quota.empty() || quota == "max" || quota[0] == '-') return 0;
  double q = std::atof(quota.c_str()), p = std::atof(period.c_str());
  if (q <= 0 || p <= 0) return 0;
  return std::max(1, static_cast<int>(std::ceil(q / p)));
}

std::string first_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

// The smallest cgroup CPU quota on the way from this process's cgroup to
// the root, or 0 for none.
int cgroup_cpus() {
  int best = 0;
  auto take = [&](int c) {
    if (c > 0 && (best == 0 || c < best)) best = c;
  };
  std::ifstream f("/proc/self/cgroup");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("0::", 0) == 0) {  // cgroup v2: "max 100000" or "200000 100000"
      std::string path = line.substr(3);
      for (;;) {
        std::istringstream ss(first_line("/sys/fs/cgroup" + path + "/cpu.max"));
        std::string q, p;
        ss >> q >> p;
        take(quota_cpus(q, p));
        if (path.empty() || path == "/") break;
        path = path.substr(0, path.rfind('/'));
      }
    }
  }
  take(quota_cpus(first_line("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), first_line("/sys/fs/cgroup/cpu/cpu.cfs_period_us")));
  return best;
}

}  // namespace

int usable_cpus() {
  int n = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (int q = cgroup_cpus(); q > 0 && q < n) n = q;
  return std::max(1, n);
}

}  // namespace tj
