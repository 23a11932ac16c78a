#include "support/files.h"

#include <unistd.h>

#include <chrono>
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

void write_atomic(const fs::path& path, const void* data, size_t size) {
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
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

}  // namespace tj
