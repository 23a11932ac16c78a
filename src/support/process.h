// Running other programs: the system compiler, fresh tjc processes.
#pragma once

#include <string>

namespace tj {

// `s` as one word for /bin/sh.
std::string shell_quote(const std::string& s);

// Runs `cmd` with /bin/sh and collects its standard output (and its standard
// error too, with `merge_stderr`; otherwise that goes to ours). Returns the
// exit status, 128 + the signal that killed it (as a shell reports it), or
// -1 when it could not start. The read retries when a signal interrupts it:
// this process may take signals without SA_RESTART (libFuzzer's timer, a
// profiler), and stopping early would close the pipe under the command,
// which then dies of SIGPIPE at its next write (g++: status 2, nothing
// printed).
int run_command(const std::string& cmd, std::string* output, bool merge_stderr = true);

}  // namespace tj
