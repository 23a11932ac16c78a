#include "codegen/cpp/build.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <xxhash.h>

#include "support/cpus.h"
#include "support/files.h"
#include "support/log.h"
#include "support/paths.h"
#include "support/process.h"
#include "tensorjit/error.h"

namespace tj {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;


// A sidecar's line: the file's hash and size.
std::string sidecar_line(const std::string& data) { return hex128(XXH3_128bits(data.data(), data.size())) + " " + std::to_string(data.size()) + "\n"; }

// The library at `lib` is complete and is the one its sidecar describes.
bool entry_is_valid(const fs::path& lib, const fs::path& sidecar) {
  bool ok_lib, ok_side;
  std::string data = read_file(lib, &ok_lib);
  std::string recorded = read_file(sidecar, &ok_side);
  if (!ok_lib || !ok_side) return false;
  return recorded == sidecar_line(data);
}

// Writes the sidecar of `file` as it is now (last, after the file is in
// place); false when the file cannot be read (no sidecar: not an entry).
bool seal_entry(const fs::path& file, const fs::path& sidecar) {
  bool ok;
  const std::string data = read_file(file, &ok);
  if (ok) write_atomic(sidecar, sidecar_line(data));
  return ok;
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

void warn(const std::string& message) { std::fprintf(stderr, "tensorjit: warning: %s\n", message.c_str()); }

// `name` as the shell would run it: through PATH unless it holds a slash,
// then through symlinks. Empty when there is no such executable.
std::string resolve_executable(const std::string& name) {
  std::vector<fs::path> tries;
  if (name.find('/') != std::string::npos) {
    tries.push_back(name);
  } else if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    for (std::string d; std::getline(ss, d, ':');) tries.push_back(fs::path(d.empty() ? "." : d) / name);
  }
  for (const auto& t : tries) {
    std::error_code ec;
    if (fs::is_regular_file(t, ec) && ::access(t.c_str(), X_OK) == 0) {
      fs::path real = fs::canonical(t, ec);
      return ec ? t.string() : real.string();
    }
  }
  return "";
}

// Where new entries go. The cache folder if it can be written; otherwise,
// after one warning, a private folder of this process in the system temp
// folder, removed at exit. Throws tj::Error when neither can be had.
class KernelDirs {
 public:
  ~KernelDirs() {
    std::error_code ec;
    for (const auto& [pid, d] : private_)
      if (pid == ::getpid()) fs::remove_all(d, ec);  // a forked child leaves its parent's alone
  }
  fs::path writable(const fs::path& cache) {
    std::lock_guard<std::mutex> lock(mu_);
    std::error_code ec;
    if (auto it = chosen_.find(cache); it != chosen_.end() && fs::is_directory(it->second, ec)) return it->second;
    std::string why = try_writable(cache);
    fs::path dir = cache;
    if (!why.empty()) {
      std::string tmpl = (fs::temp_directory_path(ec) / "tensorjit-XXXXXX").string();
      if (ec || !::mkdtemp(tmpl.data())) {
        throw Error("cache directory " + cache.string() + " cannot be written (" + why +
                    ") and no private folder could be made in the temp folder");
      }
      private_.emplace_back(::getpid(), tmpl);
      dir = fs::path(tmpl) / "kernels";
      fs::create_directories(dir, ec);
      warn("cache directory " + cache.string() + " cannot be written (" + why + "); compiling into " + tmpl +
           " instead (removed at exit)");
    }
    chosen_[cache] = dir;
    return dir;
  }

 private:
  // Empty when `dir` can be made and a file created in it; else the reason.
  static std::string try_writable(const fs::path& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return ec.message();
    std::string probe = (dir / ".write-test-XXXXXX").string();
    int fd = ::mkstemp(probe.data());
    if (fd < 0) return std::strerror(errno);
    ::close(fd);
    ::unlink(probe.c_str());
    return "";
  }

  std::mutex mu_;
  std::map<fs::path, fs::path> chosen_;
  std::vector<std::pair<pid_t, std::string>> private_;  // made by which process
};

KernelDirs& kernel_dirs() {
  static KernelDirs dirs;  // destroyed at exit, taking the private folders with it
  return dirs;
}

// The probe: exported, and returns a value no broken toolchain returns by
// accident. Built with the real flags (sanitizers included), it also says
// which float vector those flags give the generated code, as the prelude's
// tj_vfn picks it: the emitter's tiles are sized for that width, not for the
// CPU's (-mno-avx512f in $TJ_CXXFLAGS on an AVX-512 machine).
constexpr int kProbeAnswer = 0x7e5a;
const char* const kProbeSource =
    "extern \"C\" int tj_probe() { return 0x7e5a; }\n"
    "extern \"C\" int tj_probe_vector_bytes() {\n"
    "#if defined(__AVX512F__)\n  return 64;\n#elif defined(__AVX__)\n  return 32;\n#else\n  return 16;\n#endif\n}\n";

}  // namespace

LoadedLibrary::~LoadedLibrary() {
  if (handle_) dlclose(handle_);
}

void* LoadedLibrary::symbol(const char* name) const {
  void* s = dlsym(handle_, name);
  if (!s) throw Error(std::string("generated library ") + path_ + " has no symbol " + name);
  return s;
}

namespace {

// `exe --version`, remembered in the cache folder under the executable's
// file identity (path, device, inode, size, modification and change times):
// running it was 7 of a warm start's 8 ms of probing. A replaced or touched
// executable is another identity and runs it again; a cache folder that
// cannot be written just means running it every time.
int compiler_version(const std::string& name, const std::string& exe, std::string* version) {
  struct stat st;
  std::string memo;
  if (::stat(exe.c_str(), &st) == 0) {
    std::string id = exe + "\n" + std::to_string(st.st_dev) + " " + std::to_string(st.st_ino) + " " + std::to_string(st.st_size) + " " +
                     std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + " " +
                     std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec);
    memo = (std::filesystem::path(cache_dir()) / "compilers" / (hash_hex(id.data(), id.size()) + ".version")).string();
    bool ok;
    std::string text = read_file(memo, &ok);
    if (ok && text.rfind("tj-version\n", 0) == 0 && text.size() > 11) {
      *version = text.substr(11);
      return 0;
    }
  }
  int status = run_command(shell_quote(name) + " --version", version);
  if (status == 0 && !version->empty() && !memo.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(memo).parent_path(), ec);
    try {
      write_atomic(memo, "tj-version\n" + *version);
    } catch (const Error&) {
    }
  }
  return status;
}

}  // namespace

std::optional<Compiler> probe_compiler(const std::string& name, std::string* why) {
  Compiler c;
  c.path = name;
  c.executable = resolve_executable(name);
  if (c.executable.empty()) {
    *why = "not found";
    return std::nullopt;
  }
  std::string version;
  if (int st = compiler_version(name, c.executable, &version); st != 0) {
    *why = "`" + name + " --version` failed with status " + std::to_string(st);
    return std::nullopt;
  }
  if (version.empty()) {
    *why = "`" + name + " --version` printed nothing";
    return std::nullopt;
  }
  bool ok;
  std::string exe = read_file(c.executable, &ok);
  if (!ok) {
    *why = "cannot read " + c.executable;
    return std::nullopt;
  }
  // The whole --version (a wrapper may print the same first line) and the
  // executable's contents (a wrapper script that adds flags is not the
  // compiler it runs; a reinstalled compiler is a new one).
  c.identity = version + "executable " + hex128(XXH3_128bits(exe.data(), exe.size()));
  try {
    BuildResult r = build_library(kProbeSource, c);
    int got = reinterpret_cast<int (*)()>(r.library->symbol("tj_probe"))();
    if (got != kProbeAnswer) {
      *why = "its probe library returned " + std::to_string(got) + ", not " + std::to_string(kProbeAnswer);
      return std::nullopt;
    }
    c.vector_bytes = reinterpret_cast<int (*)()>(r.library->symbol("tj_probe_vector_bytes"))();
  } catch (const Error& e) {
    std::string msg = e.what();
    *why = "it failed to build and load a probe library: " + msg.substr(0, 1000);
    return std::nullopt;
  }
  return c;
}

std::optional<Compiler> find_compiler() {
  std::vector<std::string> candidates;
  const char* env = std::getenv("TJ_CXX");
  if (env && *env) candidates.push_back(env);  // named: used or not, never replaced by another
  else candidates = {"c++", "g++", "clang++"};
  const char* path = std::getenv("PATH");
  const char* flags = std::getenv("TJ_CXXFLAGS");  // the probe's flags: whether it builds, and its vectors
  std::string memo_key = (env ? env : "") + std::string("\n") + (flags ? flags : "") + "\n" + (path ? path : "") + "\n" + cache_dir();

  static std::mutex mu;
  static std::map<std::string, std::optional<Compiler>> found;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = found.find(memo_key); it != found.end()) return it->second;
  std::optional<Compiler> result;
  for (const auto& c : candidates) {
    std::string why;
    result = probe_compiler(c, &why);
    if (result) break;
    if (why != "not found" || (env && *env))
      warn("C++ compiler " + c + (env && *env ? " ($TJ_CXX)" : "") + " is not used: " + why);
  }
  found[memo_key] = result;
  return result;
}

int64_t generated_vector_floats() {
  const std::optional<Compiler> cxx = find_compiler();
  return cxx ? cxx->vector_bytes / 4 : __builtin_cpu_supports("avx512f") ? 16 : 8;
}

// -fno-math-errno and -fno-trapping-math change no result: the generated code
// never reads errno or the floating-point exception flags. They let GCC
// vectorize loops holding sqrt, exp's range selects and divisions, which it
// otherwise keeps scalar.
std::vector<std::string> default_flags() {
  std::vector<std::string> flags = {"-O3",     "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fopenmp-simd",
                                    "-shared", "-fPIC",         "-std=c++20"};
#if defined(__GLIBC__) && defined(__x86_64__)
  flags.push_back("-lmvec");  // glibc's vector math (erff's vector variants; the prelude)
#endif
#ifdef TJ_SANITIZE_FLAGS
  // This process is instrumented (CMake's TJ_SANITIZE): so is its generated
  // code, or the sanitizer runtime would not see its memory accesses.
  std::stringstream ss(TJ_SANITIZE_FLAGS);
  for (std::string f; ss >> f;) flags.push_back(f);
#endif
  // $TJ_CXXFLAGS: more flags, after these (-mno-avx512f builds the kernels'
  // forms for CPUs without AVX-512 on one with it: ctest's NarrowVectors
  // runs). The probe builds with them too, so a flag the compiler rejects
  // leaves it unused, with its message.
  if (const char* extra = std::getenv("TJ_CXXFLAGS")) {
    std::stringstream es(extra);
    for (std::string f; es >> f;) flags.push_back(f);
  }
  return flags;
}

std::vector<std::string> translation_units(const std::string& source, int n) {
  const std::string mark = kUnitMark;
  std::vector<size_t> at;
  for (size_t p = source.find(mark); p != std::string::npos; p = source.find(mark, p + mark.size())) at.push_back(p);
  if (n <= 1 || at.size() < 3) return {source};  // fewer than two pieces
  const std::string head = source.substr(0, at.front()), tail = source.substr(at.back() + mark.size());
  std::vector<std::string> pieces;
  size_t total = 0;
  for (size_t i = 0; i + 1 < at.size(); ++i) {
    pieces.push_back(source.substr(at[i] + mark.size(), at[i + 1] - at[i] - mark.size()));
    total += pieces.back().size();
  }
  const size_t units = std::min(pieces.size(), static_cast<size_t>(n));
  std::vector<std::string> out;
  std::string body;
  size_t done = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    body += pieces[i];
    done += pieces[i].size();
    // Cut when this unit has its share of the bytes, or when the pieces
    // left are just enough for one per unit left.
    const size_t left = pieces.size() - i - 1, units_left = units - out.size() - 1;
    if (units_left > 0 && left > 0 && (done * units >= total * (out.size() + 1) || left == units_left))
      out.push_back(head + body + tail), body.clear();
  }
  out.push_back(head + body + tail);
  return out;
}

namespace {

// The flags that compile (not link): all but -shared and libraries.
std::vector<std::string> compile_only(const std::vector<std::string>& flags) {
  std::vector<std::string> out;
  for (const auto& f : flags)
    if (f != "-shared" && f.rfind("-l", 0) != 0) out.push_back(f);
  return out;
}

// kStdIncludes precompiled for this compiler, CPU and flags: the header's
// path, with its .gch beside it (GCC looks for that first on -include), or
// empty where there is none (not GCC, no writable cache folder, a failed
// build: the programs then parse the headers, with the same result). Built
// once into <cache>/pch/<key>/ (about 26 MB, outside the kernels' size
// limit), written atomically with a sidecar of its hash as the kernel
// entries are, and checked once per process: a truncated PCH is a fatal
// error to GCC, and one with a valid head but corrupt body was accepted.
// What this process knows of each folder's PCH: its header ("": none, not
// tried again), and the size and time the .gch had when it was checked (a
// change, another process's rebuild or damage, has it checked again).
struct KnownHeader {
  bool tried = false;
  std::string header;
  std::uintmax_t size = 0;
  fs::file_time_type time;
};
std::mutex pch_mutex;
std::map<std::string, KnownHeader> pch_known;  // by folder

std::string standard_header(const Compiler& cxx, const std::vector<std::string>& flags) {
  if (cxx.identity.find("Free Software Foundation") == std::string::npos) return "";  // GCC's --version
  if (const char* off = std::getenv("TJ_PCH"); off && std::string(off) == "off") return "";
  const std::vector<std::string> cflags = compile_only(flags);
  std::string keyed = std::string(kStdIncludes) + "\n// compiler: " + cxx.identity + "\n// cpu: " + cpu_identity() + "\n// flags:";
  for (const auto& f : cflags) keyed += " " + f;
  const fs::path dir = fs::path(cache_dir()) / "pch" / hash_hex(keyed.data(), keyed.size()), header = dir / "tj_std.h", gch = dir / "tj_std.h.gch",
                 sidecar = dir / "tj_std.h.ok";
  std::lock_guard<std::mutex> lock(pch_mutex);
  std::error_code ec;
  KnownHeader& known = pch_known[dir.string()];
  std::string& result = known.header;
  auto checked = [&] {
    known.size = fs::file_size(gch, ec), known.time = fs::last_write_time(gch, ec);
    return result = header.string();
  };
  if (known.tried) {
    if (result.empty()) return result;  // none, or failed: not tried again
    if (fs::file_size(gch, ec) == known.size && fs::last_write_time(gch, ec) == known.time) return result;
    result.clear();
  }
  known.tried = true;
  if (entry_is_valid(gch, sidecar)) return checked();
  try {
    fs::create_directories(dir, ec);
    if (ec) return result;
    write_atomic(header, kStdIncludes);
    const fs::path tmp = temporary_beside(gch);
    std::string cmd = shell_quote(cxx.path) + " -x c++-header " + shell_quote(header.string()) + " -o " + shell_quote(tmp.string()), out;
    for (const auto& f : cflags) cmd += " " + shell_quote(f);
    const auto t0 = Clock::now();
    if (run_command(cmd, &out) != 0 || !fs::exists(tmp, ec)) {
      fs::remove(tmp, ec);
      if (log_enabled("compile")) std::fprintf(stderr, "[compile] the standard headers did not precompile:\n%s\n", out.substr(0, 2000).c_str());
      return result;
    }
    fs::rename(tmp, gch, ec);
    if (ec || !seal_entry(gch, sidecar)) return result;
    if (log_enabled("compile"))
      std::fprintf(stderr, "[compile] standard headers precompiled in %.3f s: %s\n", std::chrono::duration<double>(Clock::now() - t0).count(),
                   gch.c_str());
  } catch (const Error&) {  // the folder cannot be written
    return result;
  }
  return checked();
}

// A precompiled header found wanting after all (a compile failed with it
// and passed without): not used again, by this process or (its sidecar
// gone) the next, which builds it anew.
void forget_standard_header(const std::string& header) {
  std::lock_guard<std::mutex> lock(pch_mutex);
  for (auto& [dir, known] : pch_known)
    if (known.header == header) known.header.clear();
  std::error_code ec;
  fs::remove(fs::path(header).parent_path() / "tj_std.h.ok", ec);
}

// Compiles the units of `source` into the shared library `lib`: one command
// for a single unit; for several, each to an object in parallel (one shell
// running them all, so that no compiler inherits another's pipe), then a
// link. Returns the compilers' output; throws tj::Error on a failure.
std::string compile_units(const std::string& source, const fs::path& src, const fs::path& lib, const Compiler& cxx,
                          const std::vector<std::string>& flags) {
  std::vector<std::string> units = translation_units(source, usable_cpus());
  std::string out, cmd;
  auto fail = [&](int status, const std::string& what) {
    throw Error("compiling generated code failed (" + cxx.path + ", status " + std::to_string(status) + "):\n" +
                (what.empty() ? "(the compiler printed nothing; command: " + cmd.substr(0, 1000) + ")" : what.substr(0, 4000)));
  };
  if (units.size() == 1) {
    // Flags after the source, so that libraries (-l) link.
    cmd = shell_quote(cxx.path) + " " + shell_quote(src.string()) + " -o " + shell_quote(lib.string());
    for (const auto& f : flags) cmd += " " + shell_quote(f);
    if (int status = run_command(cmd, &out); status != 0) fail(status, out);
    return out;
  }
  std::string compile_flags;  // everything but linking
  for (const auto& f : compile_only(flags)) compile_flags += " " + shell_quote(f);
  std::vector<fs::path> files;
  auto remove_files = [&] {
    std::error_code ec;
    for (const auto& f : files) fs::remove(f, ec);
  };
  try {
    std::string objects;
    cmd = "s=0";
    for (size_t i = 0; i < units.size(); ++i) {
      fs::path u = lib.string() + ".u" + std::to_string(i) + ".cpp", o = lib.string() + ".u" + std::to_string(i) + ".o",
               log = lib.string() + ".u" + std::to_string(i) + ".log";
      files.insert(files.end(), {u, o, log});
      write_atomic(u, units[i]);
      cmd += "; " + shell_quote(cxx.path) + " -c " + shell_quote(u.string()) + " -o " + shell_quote(o.string()) + compile_flags + " >" +
             shell_quote(log.string()) + " 2>&1 & p" + std::to_string(i) + "=$!";
      objects += " " + shell_quote(o.string());
    }
    for (size_t i = 0; i < units.size(); ++i) cmd += "; wait $p" + std::to_string(i) + " || s=$?";
    cmd += "; exit $s";
    int status = run_command(cmd, &out);
    for (size_t i = 0; i < units.size(); ++i) {
      bool ok;
      out += read_file(files[3 * i + 2], &ok);
    }
    if (status != 0) fail(status, out);
    cmd = shell_quote(cxx.path) + objects + " -o " + shell_quote(lib.string());
    for (const auto& f : flags) cmd += " " + shell_quote(f);
    if (status = run_command(cmd, &out); status != 0) fail(status, out);
  } catch (...) {  // a unit that failed, or could not be written: none of them stays
    remove_files();
    throw;
  }
  remove_files();
  return out;
}

}  // namespace

BuildResult build_library(const std::string& source, const Compiler& cxx, const std::vector<std::string>& flags) {
  BuildResult r;
  std::string keyed = source + "\n// compiler: " + cxx.identity + "\n// cpu: " + cpu_identity() + "\n// flags:";
  for (const auto& f : flags) keyed += " " + f;
  r.key = hex128(XXH3_128bits(keyed.data(), keyed.size()));

  // An entry in the cache folder is used even when the folder is read-only
  // (a shared cache); new entries go where kernel_dirs() says.
  fs::path dir = fs::path(cache_dir()) / "kernels";
  std::error_code ec;
  auto t0 = Clock::now();
  fs::path lib, sidecar, src;
  auto use = [&](const fs::path& d) {
    lib = d / (r.key + ".so"), sidecar = d / (r.key + ".ok"), src = d / (r.key + ".cpp");
    return entry_is_valid(lib, sidecar);
  };
  r.cache_hit = use(dir);
  if (!r.cache_hit) {
    if (fs::path w = kernel_dirs().writable(dir); w != dir) r.cache_hit = use(w);
  }
  r.source_path = src.string();
  if (r.cache_hit) touch_files({lib, sidecar, src});  // used: last to be evicted
  if (!r.cache_hit) {
    if (fs::exists(lib, ec)) {
      if (log_enabled("compile")) std::fprintf(stderr, "[compile] cache entry %s is incomplete or corrupt: rebuilding\n", r.key.c_str());
      fs::remove(sidecar, ec);
    }
    write_atomic(src, source);
    const fs::path tmp = temporary_beside(lib);
    std::string out;
    // The standard headers precompiled, for the programs that include
    // them first; where a compile fails with them, once more without.
    const std::string pch = source.find(kStdIncludes) < 200 ? standard_header(cxx, flags) : "";
    bool built = false;
    if (!pch.empty()) {
      std::vector<std::string> with = flags;
      with.insert(with.end(), {"-include", pch});
      try {
        out = compile_units(source, src, tmp, cxx, with);
        built = true;
      } catch (const Error& e) {
        if (log_enabled("compile")) std::fprintf(stderr, "[compile] failed with the precompiled headers, trying without:\n%s\n", e.what());
      }
    }
    if (!built) {
      try {
        out = compile_units(source, src, tmp, cxx, flags);
      } catch (const Error&) {
        fs::remove(tmp, ec);
        throw;
      }
      if (!pch.empty()) forget_standard_header(pch);
    }
    if (!fs::exists(tmp, ec)) {
      throw Error("compiling generated code failed (" + cxx.path + " exited with status 0 but wrote no library):\n" +
                  out.substr(0, 4000));
    }
    fs::rename(tmp, lib, ec);
    if (ec) throw Error("cannot install " + lib.string() + ": " + ec.message());
    seal_entry(lib, sidecar);
    // The folder held under TJ_CACHE_MAX_MB: least recently used libraries first.
    auto note = [](const std::string& what) {
      if (log_enabled("compile")) std::fprintf(stderr, "[compile] kernel cache: %s\n", what.c_str());
    };
    evict_least_recent(lib.parent_path(), cache_size_limit(note), {lib, sidecar, src}, note);
    r.compile_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.compiler_said = out;
    if (log_enabled("compile")) {
      std::fprintf(stderr, "[compile] %s: %.3f s with %s\n", r.key.c_str(), r.compile_seconds, cxx.path.c_str());
      // Generated code should compile silently: a warning is worth a look.
      if (!out.empty()) std::fprintf(stderr, "[compile] %s: the compiler said:\n%s\n", r.key.c_str(), out.substr(0, 4000).c_str());
    }
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
