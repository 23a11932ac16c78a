#include "codegen/cpp/build.h"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <xxhash.h>

#include "support/log.h"
#include "support/paths.h"
#include "tensorjit/error.h"

namespace tj {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// Runs a shell command, returning its exit status and combined output.
int run_command(const std::string& cmd, std::string* output) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

std::string hex128(XXH128_hash_t h) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}

std::string read_file(const fs::path& p, bool* ok) {
  std::ifstream f(p, std::ios::binary);
  *ok = static_cast<bool>(f);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Writes `data` to `path` atomically: a unique temporary name, then rename.
void write_atomic(const fs::path& path, const std::string& data) {
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(Clock::now().time_since_epoch().count());
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f || !(f << data)) throw Error("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw Error("cannot write " + path.string() + ": " + ec.message());
}

// The library at `lib` is complete and is the one its sidecar describes.
bool entry_is_valid(const fs::path& lib, const fs::path& sidecar) {
  bool ok_lib, ok_side;
  std::string data = read_file(lib, &ok_lib);
  std::string recorded = read_file(sidecar, &ok_side);
  if (!ok_lib || !ok_side) return false;
  return recorded == hex128(XXH3_128bits(data.data(), data.size())) + " " + std::to_string(data.size()) + "\n";
}

// -march=native code is only valid on this kind of CPU: its model and
// feature flags are part of the cache key (a cache folder may be shared).
const std::string& cpu_identity() {
  static const std::string id = [] {
    std::ifstream f("/proc/cpuinfo");
    std::string line, model, flags;
    while (std::getline(f, line) && (model.empty() || flags.empty())) {
      if (model.empty() && line.rfind("model name", 0) == 0) model = line;
      if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
    }
    return model + "\n" + flags;
  }();
  return id;
}

}  // namespace

LoadedLibrary::~LoadedLibrary() {
  if (handle_) dlclose(handle_);
}

void* LoadedLibrary::symbol(const char* name) const {
  void* s = dlsym(handle_, name);
  if (!s) throw Error(std::string("generated library ") + path_ + " has no symbol " + name);
  return s;
}

std::optional<Compiler> find_compiler() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("TJ_CXX"); env && *env) candidates.push_back(env);
  else candidates = {"c++", "g++", "clang++"};
  for (const auto& c : candidates) {
    std::string out;
    if (run_command(quote(c) + " --version", &out) != 0) continue;
    std::string first = out.substr(0, out.find('\n'));
    if (first.empty()) continue;
    return Compiler{c, first};
  }
  return std::nullopt;
}

// -fno-math-errno and -fno-trapping-math change no result: the generated code
// never reads errno or the floating-point exception flags. They let GCC
// vectorize loops holding sqrt, exp's range selects and divisions, which it
// otherwise keeps scalar.
std::vector<std::string> default_flags() {
  return {"-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fopenmp", "-shared", "-fPIC", "-std=c++20", "-lopenblas"};
}

BuildResult build_library(const std::string& source, const Compiler& cxx, const std::vector<std::string>& flags) {
  BuildResult r;
  std::string keyed = source + "\n// compiler: " + cxx.identity + "\n// cpu: " + cpu_identity() + "\n// flags:";
  for (const auto& f : flags) keyed += " " + f;
  r.key = hex128(XXH3_128bits(keyed.data(), keyed.size()));

  fs::path dir = fs::path(cache_dir()) / "kernels";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create cache directory " + dir.string() + ": " + ec.message());
  fs::path lib = dir / (r.key + ".so"), sidecar = dir / (r.key + ".ok"), src = dir / (r.key + ".cpp");
  r.source_path = src.string();

  auto t0 = Clock::now();
  r.cache_hit = entry_is_valid(lib, sidecar);
  if (!r.cache_hit) {
    if (fs::exists(lib)) {
      if (log_enabled("compile")) std::fprintf(stderr, "[compile] cache entry %s is incomplete or corrupt: rebuilding\n", r.key.c_str());
      fs::remove(sidecar, ec);
    }
    write_atomic(src, source);
    fs::path tmp = lib;
    tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(Clock::now().time_since_epoch().count());
    // Flags after the source, so that libraries (-l) link.
    std::string cmd = quote(cxx.path) + " " + quote(src.string()) + " -o " + quote(tmp.string());
    for (const auto& f : flags) cmd += " " + quote(f);
    std::string out;
    int status = run_command(cmd, &out);
    if (status != 0) {
      fs::remove(tmp, ec);
      throw Error("compiling generated code failed (" + cxx.path + ", status " + std::to_string(status) + "):\n" + out.substr(0, 4000));
    }
    fs::rename(tmp, lib, ec);
    if (ec) throw Error("cannot install " + lib.string() + ": " + ec.message());
    bool ok;
    std::string data = read_file(lib, &ok);
    write_atomic(sidecar, hex128(XXH3_128bits(data.data(), data.size())) + " " + std::to_string(data.size()) + "\n");
    r.compile_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (log_enabled("compile"))
      std::fprintf(stderr, "[compile] %s: %.3f s with %s\n", r.key.c_str(), r.compile_seconds, cxx.identity.c_str());
  }
  auto t1 = Clock::now();
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw Error(std::string("cannot load generated library: ") + dlerror());
  r.library = std::make_shared<LoadedLibrary>(h, lib.string());
  r.load_seconds = std::chrono::duration<double>(Clock::now() - t1).count() +
                   (r.cache_hit ? std::chrono::duration<double>(t1 - t0).count() : 0.0);
  return r;
}

}  // namespace tj
