#include "support/scratch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>

namespace tj::testing {
namespace {

namespace fs = std::filesystem;

// The folders made so far, removed (with what is in them) at exit.
class Scratch {
 public:
  ~Scratch() {
    std::error_code ec;
    for (const auto& [name, dir] : dirs_) fs::remove_all(dir, ec);
  }
  const std::string& get(std::string_view name) {
    auto it = dirs_.find(std::string(name));
    if (it != dirs_.end()) return it->second;
    std::string dir = std::string(::testing::TempDir()) + "tj_" + std::string(name) + "_" + std::to_string(::getpid());
    std::error_code ec;
    fs::remove_all(dir, ec);  // a leftover of a crashed process of the same pid
    fs::create_directories(dir);
    return dirs_.emplace(std::string(name), dir).first->second;
  }

 private:
  std::map<std::string, std::string, std::less<>> dirs_;
};

Scratch& scratch() {
  static Scratch s;
  return s;
}

}  // namespace

std::string scratch_dir(std::string_view name) { return scratch().get(name); }

void use_scratch_cache(std::string_view name) { setenv("TJ_CACHE_DIR", scratch().get(name).c_str(), 1); }

}  // namespace tj::testing
