#include "bench/busy.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "codegen/cpp/build.h"
#include "support/process.h"
#include "tensorjit/error.h"

namespace tj::bench {

namespace {

// A source that takes the compiler about a second and a few hundred MB.
const char* kBusySource =
    "#include <algorithm>\n#include <map>\n#include <regex>\n#include <string>\n#include <unordered_map>\n#include <vector>\n"
    "template <int N> struct Fib { static constexpr long v = Fib<N - 1>::v + Fib<N - 2>::v; };\n"
    "template <> struct Fib<1> { static constexpr long v = 1; };\ntemplate <> struct Fib<0> { static constexpr long v = 0; };\n"
    "long busy(const std::string& s) {\n  std::regex r(\"([a-z]+)@([a-z]+)\\\\.com\");\n  std::map<std::string, int> m;\n"
    "  for (std::sregex_iterator i(s.begin(), s.end(), r), e; i != e; ++i) m[(*i)[1]]++;\n"
    "  std::vector<long> v(m.size());\n  std::sort(v.begin(), v.end());\n  return Fib<60>::v + static_cast<long>(v.size());\n}\n";

}  // namespace

BusyLoad::BusyLoad(int jobs, double max_seconds, const std::string& folder) {
  auto cxx = find_compiler();
  if (!cxx) throw Error("--busy: no C++ compiler to make the load with ($TJ_CXX, c++, g++, clang++)");
  namespace fs = std::filesystem;
  fs::path src = fs::path(folder) / "busy.cpp";
  std::ofstream(src) << kBusySource;
  if (!fs::exists(src)) throw Error("--busy: cannot write " + src.string());
  long seconds = std::max(1L, static_cast<long>(max_seconds));
  for (int i = 0; i < jobs; ++i) {
    std::string obj = (fs::path(folder) / ("busy" + std::to_string(i) + ".o")).string();
    std::string loop = "end=$(( $(date +%s) + " + std::to_string(seconds) + " )); while [ $(date +%s) -lt $end ]; do " + shell_quote(cxx->path) +
                       " -O2 -std=c++20 -c " + shell_quote(src.string()) + " -o " + shell_quote(obj) + " >/dev/null 2>&1; done";
    pid_t pid = fork();
    if (pid < 0) throw Error("--busy: fork failed");
    if (pid == 0) {  // only async-signal-safe calls until exec
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      execl("/bin/sh", "sh", "-c", loop.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    setpgid(pid, pid);  // also here: whichever runs first
    groups_.push_back(pid);
  }
}

BusyLoad::~BusyLoad() {
  for (pid_t g : groups_) kill(-g, SIGKILL);
  for (pid_t g : groups_) {
    int st;
    while (waitpid(g, &st, 0) < 0 && errno == EINTR) {
    }
  }
}

std::string run_self(const std::vector<std::string>& args) {
  std::string cmd = shell_quote(std::filesystem::read_symlink("/proc/self/exe").string());
  for (const auto& a : args) cmd += " " + shell_quote(a);
  std::string out;
  int st = run_command(cmd, &out, false);  // its messages go to our standard error
  if (st != 0) throw Error("a fresh process failed (its messages are above): " + cmd.substr(0, 300));
  return out;
}

const std::chrono::steady_clock::time_point process_start = std::chrono::steady_clock::now();

}  // namespace tj::bench
