// A folder of this test process's own under gtest's temp dir
// (TEST_TMPDIR, else /tmp), made empty on first use and removed when the
// process exits. Every compiled test writes its kernel cache here: ctest
// runs each test in a process of its own, and caches left behind filled a
// CI machine's disk (24 GB over one run of the suite).
#pragma once

#include <string>
#include <string_view>

namespace tj::testing {

// TempDir()/tj_<name>_<pid>; the same path for the same name.
std::string scratch_dir(std::string_view name);

// scratch_dir(name), made this process's TJ_CACHE_DIR.
void use_scratch_cache(std::string_view name);

}  // namespace tj::testing
