#include "tune/autotune.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "runtime/executable.h"
#include "support/files.h"
#include "support/identity.h"
#include "support/log.h"
#include "support/paths.h"
#include "support/timing.h"
#include "tune/calibrate.h"

namespace tj {

namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "tensorjit tuning 1";
constexpr double kWinRatio = 0.97;   // a candidate's median time over the rule's, at most
constexpr double kWinShare = 0.75;   // rounds it must be faster in, at least
constexpr double kNoisy = 0.25;      // the rule's interquartile range over its median, at most
constexpr int kMinRounds = 7, kMaxRounds = 21;
constexpr double kSample = 2e-4;     // seconds of calls per sample, at least
constexpr double kKeepRatio = 0.98;  // the program with new choices over the rules', at most
constexpr double kKeepShare = 0.6;   // rounds it must be faster in, at least

void note(const std::string& what) {
  if (log_enabled("autotune")) std::fprintf(stderr, "[autotune] %s\n", what.c_str());
}

// The entry of a kernel signature on this machine, for this tensorjit.
fs::path entry_path(const std::string& signature) {
  static const std::string machine = machine_identity();
  if (build_identity().empty()) return {};
  const std::string keyed = std::string(kFormat) + "\n" + build_identity() + "\n" + machine + "\n" + signature;
  return fs::path(cache_dir()) / "tuning" / (hash_hex(keyed.data(), keyed.size()) + ".json");
}

}  // namespace

TuningResult measure_candidates(size_t n, const std::function<double(size_t)>& run, double budget) {
  TuningResult r;
  if (n == 0) return r;
  const auto t0 = Clock::now();
  // A time as measured: never 0, so that ratios are finite.
  auto timed = [&](size_t i) { return std::max(run(i), 1e-12); };
  // Calls per sample: enough for kSample seconds of the slowest candidate's
  // second call (the first warms it up), by the wall time a call takes (a
  // kernel timed among the others costs a whole program run).
  double slowest = 0;
  for (size_t i = 0; i < n; ++i) {
    run(i);
    const auto c0 = Clock::now();
    const double own = run(i);
    slowest = std::max({slowest, seconds_since(c0), own});
  }
  const int calls = static_cast<int>(std::clamp(kSample / std::max(slowest, 1e-9), 1.0, 1000.0));
  std::vector<std::vector<double>> t(n);
  for (int round = 0; round < kMaxRounds; ++round) {
    for (size_t j = 0; j < n; ++j) {
      const size_t i = (j + static_cast<size_t>(round)) % n;  // each candidate first in turn
      double sum = 0;
      for (int c = 0; c < calls; ++c) sum += timed(i);
      t[i].push_back(sum / calls);
    }
    r.rounds = round + 1;
    if (r.rounds < kMinRounds) continue;
    const double spread = (quantile(t[0], 0.75) - quantile(t[0], 0.25)) / quantile(t[0], 0.5);
    if (spread <= kNoisy / 2 || seconds_since(t0) > budget) break;
  }
  r.noisy = (quantile(t[0], 0.75) - quantile(t[0], 0.25)) / quantile(t[0], 0.5) > kNoisy;
  double best_ratio = 1;
  for (size_t i = 0; i < n; ++i) {
    r.median_s.push_back(quantile(t[i], 0.5));
    std::vector<double> ratio;
    int faster = 0;
    for (size_t k = 0; k < t[i].size(); ++k) ratio.push_back(t[i][k] / t[0][k]), faster += t[i][k] < t[0][k];
    r.win_share.push_back(static_cast<double>(faster) / static_cast<double>(t[i].size()));
    const double m = quantile(ratio, 0.5);
    if (i > 0 && m < kWinRatio && r.win_share.back() >= kWinShare && m < best_ratio) best_ratio = m, r.winner = static_cast<int>(i);
  }
  if (r.noisy) r.winner = 0;
  r.seconds = seconds_since(t0);
  return r;
}

std::optional<int> recorded_choice(const std::string& signature, const std::vector<std::string>& labels) {
  const fs::path p = entry_path(signature);
  if (p.empty()) return std::nullopt;
  bool ok;
  const std::string text = read_file(p, &ok);
  if (!ok) return std::nullopt;
  try {
    auto j = nlohmann::json::parse(text);
    if (j.at("format") != kFormat || j.at("signature") != signature || j.at("labels").get<std::vector<std::string>>() != labels)
      return std::nullopt;
    const int w = j.at("winner").get<int>();
    if (w < 0 || static_cast<size_t>(w) >= labels.size()) return std::nullopt;
    touch_files({p});
    return w;
  } catch (const std::exception& e) {  // damaged: measured again, and rewritten
    note(p.filename().string() + " cannot be read (" + std::string(e.what()).substr(0, 200) + "): measuring again");
    return std::nullopt;
  }
}

void record_choice(const std::string& signature, const std::vector<std::string>& labels, const TuningResult& r) {
  const fs::path p = entry_path(signature);
  if (p.empty() || r.noisy) return;
  try {
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    std::vector<double> us;
    for (double s : r.median_s) us.push_back(s * 1e6);
    nlohmann::json j = {{"format", kFormat}, {"signature", signature}, {"labels", labels}, {"winner", r.winner},
                        {"median_us", us},   {"win_share", r.win_share}, {"rounds", r.rounds}};
    write_atomic(p, j.dump(1));
    evict_least_recent(p.parent_path(), cache_size_limit(note), {p}, note);
  } catch (const std::exception& e) {
    note(std::string("not recorded: ") + e.what());
  }
}

namespace {

// "k8: rows 32, partials (rule: rows 16, partials)", the rule's only when it lost.
std::string choice_line(const EmittedProgram::Tunable& t, int winner) {
  std::string line = "k" + std::to_string(t.kernel) + ": " + t.labels[static_cast<size_t>(winner)];
  return winner == 0 ? line : line + " (rule: " + t.labels[0] + ")";
}

}  // namespace

void tune_program(TuningTarget& g, CompileStats& stats) {
  const bool log = log_enabled("autotune");
  std::vector<void (*)(void**)>& kernels = *g.kernels;
  const auto& tunable = *g.tunable;
  std::vector<int> choice(tunable.size(), 0);
  std::vector<size_t> missing;
  auto finish = [&] {
    for (size_t i = 0; i < tunable.size(); ++i) stats.tuning_choices.push_back(choice_line(tunable[i], choice[i]));
  };
  auto set = [&](size_t i, int c) {
    kernels[static_cast<size_t>(tunable[i].kernel)] = g.resolve(tunable[i].symbols[static_cast<size_t>(c)]);
  };
  for (size_t i = 0; i < tunable.size(); ++i) {
    const auto& t = tunable[i];
    ++stats.tunable_kernels;
    if (std::optional<int> w = recorded_choice(t.signature, t.labels)) {
      choice[i] = *w;
      set(i, *w);
      ++stats.tuned_from_cache;
      note("kernel " + std::to_string(t.kernel) + " (" + t.signature + "): " + t.labels[static_cast<size_t>(*w)] + ", recorded");
    } else {
      missing.push_back(i);
    }
  }
  if (missing.empty()) return finish();
  const auto t0 = Clock::now();
  void** table = nullptr;
  try {
    table = g.prepare();
    note("seeded run for the measurements: " + std::to_string(static_cast<int>(seconds_since(t0) * 1e3)) + " ms");
  } catch (const std::exception& e) {
    note(std::string("not measured: a run on seeded inputs failed (") + e.what() + "); the rules' choices stand");
    return finish();
  }
  auto run_all = [&] {
    for (auto* f : kernels) f(table);
  };
  // A kernel is timed among the others (its weights evicted by theirs, as
  // in a real call) when the whole program takes under 20 ms; else alone.
  run_all();
  const auto p0 = Clock::now();
  run_all();
  const double program_s = seconds_since(p0);
  const bool in_flow = program_s < 0.02;
  note("the program takes " + std::to_string(static_cast<int>(program_s * 1e6)) + " us: kernels timed " + (in_flow ? "among the others" : "alone"));
  std::vector<TuningResult> results(tunable.size());
  std::map<std::pair<std::string, std::vector<std::string>>, size_t> measured;  // the same kernel in another layer: measured once
  for (size_t i : missing) {
    const auto& t = tunable[i];
    const size_t at = static_cast<size_t>(t.kernel);
    if (auto same = measured.find({t.signature, t.labels}); same != measured.end()) {
      results[i] = results[same->second];
      choice[i] = choice[same->second];
      set(i, choice[i]);
      ++stats.tuned_now;
      continue;
    }
    measured[{t.signature, t.labels}] = i;
    std::vector<void (*)(void**)> fns;
    for (const auto& name : t.symbols) fns.push_back(g.resolve(name));
    TuningResult r = measure_candidates(fns.size(), [&](size_t c) {
      double seconds = 0;
      for (size_t k = in_flow ? 0 : at; k < (in_flow ? kernels.size() : at + 1); ++k) {
        if (k != at) {
          kernels[k](table);
          continue;
        }
        const auto c0 = Clock::now();
        fns[c](table);
        seconds = seconds_since(c0);
      }
      return seconds;
    });
    choice[i] = r.winner;
    set(i, r.winner);
    ++stats.tuned_now;
    if (log) {
      std::string line;
      for (size_t c = 0; c < fns.size(); ++c) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "%s%s %.1f us (faster in %.0f%% of rounds)", c ? "; " : "", t.labels[c].c_str(), r.median_s[c] * 1e6,
                      r.win_share[c] * 100);
        line += buf;
      }
      note("kernel " + std::to_string(t.kernel) + " (" + t.signature + "): " + line + " over " + std::to_string(r.rounds) + " rounds" +
           (in_flow ? "" : ", alone") + " -> " + t.labels[static_cast<size_t>(r.winner)] +
           (r.noisy ? " (noisy: the rule's choice, not recorded)" : ""));
    }
    results[i] = std::move(r);
  }
  // The program with the new choices against the rules': kept only when
  // faster by 2% (median) and in 60% of the rounds.
  std::vector<size_t> changed;
  for (size_t i : missing)
    if (choice[i] != 0) changed.push_back(i);
  if (!changed.empty()) {
    TuningResult whole = measure_candidates(2, [&](size_t c) {
      for (size_t i : changed) set(i, c == 1 ? choice[i] : 0);
      const auto c0 = Clock::now();
      run_all();
      return seconds_since(c0);
    });
    const bool keep = !whole.noisy && whole.median_s[1] < kKeepRatio * whole.median_s[0] && whole.win_share[1] >= kKeepShare;
    char buf[200];
    std::snprintf(buf, sizeof buf, "the program with %zu new choices: %.1f us against the rules' %.1f us (faster in %.0f%% of rounds%s): %s",
                  changed.size(), whole.median_s[1] * 1e6, whole.median_s[0] * 1e6, whole.win_share[1] * 100, whole.noisy ? ", noisy" : "",
                  keep ? "kept" : "the rules' instead");
    note(buf);
    for (size_t i : changed) {
      if (!keep) choice[i] = 0, results[i].winner = 0;
      results[i].noisy = results[i].noisy || whole.noisy;
      set(i, choice[i]);
    }
  }
  for (size_t i : missing) record_choice(tunable[i].signature, tunable[i].labels, results[i]);
  stats.tuning_seconds = seconds_since(t0);
  finish();
}

}  // namespace tj
