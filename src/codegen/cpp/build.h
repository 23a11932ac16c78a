// Build and load generated C++: compile a translation unit into a shared
// library with the system compiler and dlopen it, through an on-disk cache.
//
// - The compiler is $TJ_CXX, else the first of c++, g++, clang++ on PATH that
//   passes a probe: it builds a tiny shared library with the real flags, which
//   is loaded and called (once per process; the probe library is a cache
//   entry like any other, so later processes only load it).
// - Cache entries live in $TJ_CACHE_DIR (default $XDG_CACHE_HOME/tensorjit or
//   ~/.cache/tensorjit), keyed by a 128-bit hash of the source, the
//   compiler's identity (its whole --version output and a hash of the
//   executable it resolves to, so a wrapper script differs from the compiler
//   it wraps), the CPU (model and feature flags: the code is built with
//   -march=native) and the flags.
// - A cache folder that cannot be written still serves the entries it holds;
//   new ones go to a private folder of this process (mkdtemp in the system
//   temp folder, removed at exit), after one warning.
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
  std::string path;        // as named: $TJ_CXX, or c++/g++/clang++ (run through PATH)
  std::string executable;  // the file it resolves to through PATH and symlinks
  std::string identity;    // `path --version` (all of it) and a hash of `executable`
  int vector_bytes = 16;   // the generated code's float vector (tj_vfn) under its flags: 64 (AVX-512), 32 (AVX) or 16, from the probe
};

// The first compiler that passes the probe; nullopt when none does (callers
// fall back to the interpreter). A candidate that exists but fails gets one
// warning on stderr saying why. Computed once per process for each value of
// $TJ_CXX, $TJ_CXXFLAGS, $PATH and the cache folder.
std::optional<Compiler> find_compiler();

// The floats in one of the generated code's vectors (tj_lanes): the
// compiler probe's, or with no compiler the CPU's (16 with AVX-512, else 8).
int64_t generated_vector_floats();

// What find_compiler() knows about one candidate, probe included: the
// compiler, or nullopt and in `why` the reason it is not used.
std::optional<Compiler> probe_compiler(const std::string& name, std::string* why);

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
  std::string compiler_said;   // the compiler's warnings on a miss (generated code should compile silently)
};

// -O3 -march=native -fno-math-errno -fno-trapping-math -fopenmp-simd -shared -fPIC
// -std=c++20 (no BLAS library: generated code calls the runtime's GEMM), -lmvec
// on x86-64 glibc (vector erf), then this build's sanitizer flags (TJ_SANITIZE in
// CMake), so that generated code is instrumented like the process loading it,
// then $TJ_CXXFLAGS.
std::vector<std::string> default_flags();

// The standard headers every generated program includes first (the
// prelude's first lines). Programs that start with them are compiled with
// them precompiled (GCC's PCH: a header built once per compiler, CPU and
// flags, in the cache folder's pch/): parsing them was 0.26 of a small
// program's 0.34 s of compiling.
inline constexpr const char* kStdIncludes =
    "#include <algorithm>\n#include <cmath>\n#include <cstdint>\n#include <cstring>\n#include <limits>\n#include <type_traits>\n";

// A line of a source where another translation unit may start: generated
// code marks each kernel (and each output function) with it. The text before
// the first mark and after the last goes into every unit; each piece
// between two marks into one. A source with marks is compiled as up to one
// unit per usable CPU, in parallel, then linked (62 kernels: 5.0 s as one
// unit on this 2-core machine); the cache still keys the whole source.
inline constexpr const char* kUnitMark = "//~ a translation unit may start here\n";

// The translation units of `source` for at most `n` compilers: the pieces
// in order, cut into runs of about equal size. One unit (the source itself)
// when it has no marks or n is 1.
std::vector<std::string> translation_units(const std::string& source, int n);

// Compiles (or finds in the cache) and loads `source`. Throws tj::Error with
// the compiler's diagnostics when compilation fails.
BuildResult build_library(const std::string& source, const Compiler& cxx, const std::vector<std::string>& flags = default_flags());

}  // namespace tj
