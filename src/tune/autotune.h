// Autotuning (CompileOptions::autotune, or TJ_AUTOTUNE=1): the emitter
// lists candidate schedules for matrix-vector products and attentions
// (EmittedProgram::tunable: rows per pass, the split, query and key
// blocks), all compiled into the program. At the first compilation each
// kernel's candidates are timed here, on this machine; the winner is kept
// in the cache ($TJ_CACHE_DIR/tuning/) under the kernel's signature, this
// machine's identity (tune/calibrate.h) and this tensorjit's, so that later
// compilations take it without measuring. TJ_LOG=autotune shows the
// candidates and their times.
//
// Timing on a busy machine must not pick a wrong winner: candidates run in
// interleaved rounds (the same noise for each), a candidate wins only when
// its time is below the rule's in most rounds and its median ratio to it
// is under 0.97, and a measurement whose rounds scatter too much is not
// recorded (the rule's choice stands, and a later compilation measures
// again).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/executable.h"

namespace tj {

struct TuningResult {
  int winner = 0;                 // index of the chosen candidate (0: the rule's)
  std::vector<double> median_s;   // per candidate, per call
  std::vector<double> win_share;  // per candidate: rounds it was faster than candidate 0
  bool noisy = false;             // the rounds scattered too much: not to be recorded
  int rounds = 0;
  double seconds = 0;             // spent measuring
};

// Times `n` candidates within about `budget` seconds: `run(i)` runs
// candidate i once and returns the seconds it took (the caller times it
// where it runs: a kernel among the program's others, whose weights
// evict its own from the caches as in a real call).
TuningResult measure_candidates(size_t n, const std::function<double(size_t)>& run, double budget = 0.8);

// The recorded winner for a kernel of this signature whose candidates are
// `labels` (the same list, in order), or nothing.
std::optional<int> recorded_choice(const std::string& signature, const std::vector<std::string>& labels);
void record_choice(const std::string& signature, const std::vector<std::string>& labels, const TuningResult& r);

// Each tunable kernel's candidate: recorded, or measured now. Then, when a
// measured choice is not the rule's, the whole program with the new
// choices against the same with the rules' (interleaved rounds): choices
// that do not make it 2% faster go back to the rules' and are recorded so.
void tune_program(TuningTarget& target, CompileStats& stats);

}  // namespace tj
