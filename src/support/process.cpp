#include "support/process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace tj {

std::string shell_quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

int run_command(const std::string& cmd, std::string* output, bool merge_stderr) {
  FILE* p = popen((merge_stderr ? cmd + " 2>&1" : cmd).c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fileno(p), buf, sizeof buf);
    if (n > 0) output->append(buf, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  int status = pclose(p);  // waits for the command to the end
  if (status == -1) return -1;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace tj
