#include "support/paths.h"

#include <cstdlib>
#include <filesystem>

namespace tj {

std::string cache_dir() {
  namespace fs = std::filesystem;
  if (const char* d = std::getenv("TJ_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return (fs::path(x) / "tensorjit").string();
  if (const char* h = std::getenv("HOME"); h && *h) return (fs::path(h) / ".cache" / "tensorjit").string();
  return (fs::temp_directory_path() / "tensorjit").string();
}

}  // namespace tj
