// Where tensorjit keeps files between runs: $TJ_CACHE_DIR, else
// $XDG_CACHE_HOME/tensorjit, else ~/.cache/tensorjit, else a temp folder.
#pragma once

#include <string>

namespace tj {

std::string cache_dir();

}  // namespace tj
