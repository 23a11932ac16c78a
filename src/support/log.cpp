#include "support/log.h"

#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

namespace tj {

namespace {

struct Topics {
  std::mutex mu;
  std::set<std::string, std::less<>> on;
  Topics() {
    const char* env = std::getenv("TJ_LOG");
    std::string_view s = env ? env : "";
    while (!s.empty()) {
      size_t c = s.find(',');
      std::string_view t = s.substr(0, c);
      if (!t.empty()) on.emplace(t);
      if (c == std::string_view::npos) break;
      s.remove_prefix(c + 1);
    }
  }
};

Topics& topics() {
  static Topics t;
  return t;
}

}  // namespace

bool log_enabled(std::string_view topic) {
  Topics& t = topics();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.on.count(topic) > 0 || t.on.count("all") > 0;
}

void enable_log(std::string_view topic) {
  Topics& t = topics();
  std::lock_guard<std::mutex> lock(t.mu);
  t.on.emplace(topic);
}

}  // namespace tj
