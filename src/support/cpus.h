// How many CPUs this process may use.
#pragma once

namespace tj {

// The CPUs this process may run on: its affinity mask, capped by a cgroup
// CPU quota (cgroup v2 cpu.max, or v1 cfs_quota_us / cfs_period_us).
int usable_cpus();

}  // namespace tj
