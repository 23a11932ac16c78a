#include "support/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tensorjit/error.h"

namespace tj {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p, bool* ok) {
  std::ifstream f(p, std::ios::binary);
  *ok = static_cast<bool>(f);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

fs::path temporary_beside(const fs::path& path) {
  static std::atomic<uint64_t> count{0};
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "." +
         std::to_string(count++);
  return tmp;
}

void write_atomic(const fs::path& path, const void* data, size_t size) {
  const fs::path tmp = temporary_beside(path);
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f || !f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size)) || (f.close(), !f)) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error("cannot write " + tmp.string());
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error("cannot write " + path.string() + ": " + ec.message());
  }
}

std::string hex128(XXH128_hash_t h) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}

void write_atomic(const fs::path& path, const std::string& data) { write_atomic(path, data.data(), data.size()); }

uintmax_t cache_size_limit(const std::function<void(const std::string&)>& note) {
  constexpr uintmax_t kDefault = uintmax_t{4096} << 20;
  const char* e = std::getenv("TJ_CACHE_MAX_MB");
  if (!e || !*e) return kDefault;
  char* end = nullptr;
  long long mb = std::strtoll(e, &end, 10);
  if (*end != '\0' || mb < 0 || mb > (int64_t{1} << 40)) {
    note("TJ_CACHE_MAX_MB='" + std::string(e).substr(0, 40) + "' is not a whole number of MB: using 4096");
    return kDefault;
  }
  return static_cast<uintmax_t>(mb) << 20;
}

std::string file_identity(int fd) {
  struct stat sb;
  if (::fstat(fd, &sb) != 0) return "";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%llu %llu %lld %lld.%09ld %lld.%09ld\n", static_cast<unsigned long long>(sb.st_dev),
                static_cast<unsigned long long>(sb.st_ino), static_cast<long long>(sb.st_size), static_cast<long long>(sb.st_mtim.tv_sec),
                sb.st_mtim.tv_nsec, static_cast<long long>(sb.st_ctim.tv_sec), sb.st_ctim.tv_nsec);
  return buf;
}

void touch_files(const std::vector<fs::path>& files) {
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& f : files) fs::last_write_time(f, now, ec);
}

void evict_least_recent(const fs::path& dir, uintmax_t limit, const std::vector<fs::path>& keep,
                        const std::function<void(const std::string&)>& note) {
  struct File {
    fs::path path;
    fs::file_time_type time;
    uintmax_t size;
  };
  std::vector<File> files;
  uintmax_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code e2;
    if (!e.is_regular_file(e2)) continue;
    File f{e.path(), e.last_write_time(e2), e.file_size(e2)};
    if (e2) continue;
    total += f.size;
    files.push_back(std::move(f));
  }
  if (total <= limit) return;
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) { return a.time < b.time; });
  for (const File& f : files) {
    if (total <= limit) break;
    if (std::find(keep.begin(), keep.end(), f.path) != keep.end()) continue;
    if (fs::remove(f.path, ec)) {
      total -= f.size;
      note("evicted " + f.path.filename().string() + " (" + std::to_string(f.size) + " bytes; the folder's limit is TJ_CACHE_MAX_MB)");
    }
  }
}

}  // namespace tj
