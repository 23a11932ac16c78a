// Build and load generated C++: compile a translation unit into a shared
// library with the system compiler and dlopen it, through an on-disk cache.
//
// - The compiler is $TJ_CXX, else the first of c++, g++, clang++ on PATH.
// - Cache entries live in $TJ_CACHE_DIR (default $XDG_CACHE_HOME/tensorjit or
//   ~/.cache/tensorjit), keyed by a 128-bit hash of the source, the
//   compiler's identity (its --version), the CPU (model and feature flags:
//   the code is built with -march=native) and the flags.
// - Writes are atomic: the library is compiled to a temporary name and
//   renamed, then a sidecar with the library's hash is written the same way.
//   An entry whose sidecar is missing or does not match (a crash mid-write, a
//   truncated file) is rebuilt, so concurrent processes and crashes never
//   leave an entry that loads broken code.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tj {

struct Compiler {
  std::string path;      // the executable
  std::string identity;  // first line of `path --version`
};

// nullopt when no compiler works (callers fall back to the interpreter).
std::optional<Compiler> find_compiler();

class LoadedLibrary {
 public:
  LoadedLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  ~LoadedLibrary();
  LoadedLibrary(const LoadedLibrary&) = delete;
  LoadedLibrary& operator=(const LoadedLibrary&) = delete;
  void* symbol(const char* name) const;  // throws tj::Error if absent
  const std::string& path() const { return path_; }

 private:
  void* handle_;
  std::string path_;
};

struct BuildResult {
  std::shared_ptr<LoadedLibrary> library;
  bool cache_hit = false;
  double compile_seconds = 0;  // 0 on a cache hit
  double load_seconds = 0;     // hashing, checking and dlopen
  std::string key;
  std::string source_path;     // the generated source, kept beside the library
};

std::vector<std::string> default_flags();  // -O3 -march=native -fno-math-errno -fno-trapping-math -fopenmp -shared -fPIC -std=c++20 -lopenblas

// Compiles (or finds in the cache) and loads `source`. Throws tj::Error with
// the compiler's diagnostics when compilation fails.
BuildResult build_library(const std::string& source, const Compiler& cxx, const std::vector<std::string>& flags = default_flags());

}  // namespace tj
