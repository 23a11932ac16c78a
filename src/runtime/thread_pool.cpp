#include "runtime/thread_pool.h"

#include <cblas.h>
#include <dlfcn.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/gemm.h"
#include "runtime/library_conv.h"
#include "support/cpus.h"
#include "support/log.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

using Clock = std::chrono::steady_clock;

// How long an idle worker spins for the next job before it sleeps, and how
// long the caller spins for parts that workers still run. Long enough to
// span the gap between two kernels of a call (a few microseconds) and
// between two calls of a decode loop; short enough that a worker waiting
// for nothing gives its core back to the machine within a fraction of a
// scheduler tick.
constexpr auto kWorkerSpin = std::chrono::microseconds(200);
constexpr auto kCallerSpin = std::chrono::microseconds(50);
// On a host's OpenMP team a job ends at the team's barrier, which waits for
// a member the OS has descheduled (a busy machine): a member that starts
// this late marks the machine busy, and jobs go to the pool's own threads,
// whose caller does without it, for a while before the team is tried again.
constexpr auto kTeamLate = std::chrono::microseconds(500);
constexpr auto kTeamBackOff = std::chrono::milliseconds(500);

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);

uint32_t* word(std::atomic<uint32_t>* a) { return reinterpret_cast<uint32_t*>(a); }
void futex_wait(std::atomic<uint32_t>* a, uint32_t expected) {
  syscall(SYS_futex, word(a), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>* a) { syscall(SYS_futex, word(a), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0); }

inline void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until pred() or `budget` passes; true if pred() held.
template <class P>
bool spin_until(P pred, std::chrono::nanoseconds budget) {
  auto end = Clock::now() + budget;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (pred()) return true;
      pause();
    }
    if (Clock::now() >= end) return pred();
  }
}

thread_local bool in_pool_body = false;  // on a worker, or the caller inside its parts
thread_local int current_thread = 0;     // this thread's index in the pool that runs it

// The OpenMP runtime already in the process (libgomp, or a runtime with its
// entry points): looked up, not linked. A host such as torch runs its own
// operators on it, and its threads spin for a while after each one.
struct OpenMp {
  void (*parallel)(void (*)(void*), void*, unsigned, unsigned) = nullptr;  // GOMP_parallel: fn on a team, the caller as thread 0
  int (*thread_num)() = nullptr;
  int (*in_parallel)() = nullptr;
  bool ok() const { return parallel && thread_num && in_parallel; }
};

const OpenMp& openmp() {
  static const OpenMp o = [] {
    OpenMp r;
    if (void* gomp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD)) {
      r.parallel = reinterpret_cast<void (*)(void (*)(void*), void*, unsigned, unsigned)>(dlsym(gomp, "GOMP_parallel"));
      r.thread_num = reinterpret_cast<int (*)()>(dlsym(gomp, "omp_get_thread_num"));
      r.in_parallel = reinterpret_cast<int (*)()>(dlsym(gomp, "omp_in_parallel"));
    }
    return r;
  }();
  return o;
}

}  // namespace

int default_threads() {
  const char* env = std::getenv("TJ_NUM_THREADS");
  if (!env || !*env) return usable_cpus();
  char* end = nullptr;
  long n = std::strtol(env, &end, 10);
  if (*end != '\0' || n < 1 || n > 1024)
    throw Error("TJ_NUM_THREADS must be a whole number from 1 to 1024, not '" + std::string(env).substr(0, 40) + "'");
  return static_cast<int>(n);
}

// A job's parts are split into one range per thread; a range's next part
// and the job it belongs to share one word, so a claim is one CAS and a
// worker that wakes up late (its job long over) cannot take a part of the
// next job by mistake.
struct alignas(64) Range {
  std::atomic<uint64_t> next{0};  // (job << 32) | next part
};

struct ThreadPool::State {
  int threads = 1;
  std::vector<std::thread> workers;
  std::mutex busy;  // one caller at a time; others run their parts alone
  std::unique_ptr<Range[]> ranges;
  alignas(64) std::atomic<uint32_t> job{0};  // a job of the pool's own workers: idle ones wait on it
  uint32_t tag = 0;                          // the last job's number, on either team (under `busy`)
  std::atomic<bool> openmp{false};           // jobs run on the host's OpenMP team (share_openmp_team)
  Clock::time_point team_again{};            // not on the team before this (a member started late; under `busy`)
  std::atomic<uint32_t> sleepers{0};
  std::atomic<bool> stop{false};
  // The current job: written before `job` is bumped, read after.
  alignas(64) std::atomic<Body> body{nullptr};
  std::atomic<void*> ctx{nullptr};
  std::atomic<int64_t> parts{0};
  alignas(64) std::atomic<uint32_t> finished{0};  // parts done in the current job
  std::atomic<uint32_t> caller_sleeping{0};

  int64_t range_begin(int r, int64_t n) const { return n * r / threads; }

  // A part of job `j` for thread `me`: from its own range, else from the
  // others in turn. -1: none left (or the job is over).
  int64_t claim(int me, uint32_t j, int64_t n) {
    for (int k = 0; k < threads; ++k) {
      int r = (me + k) % threads;
      const uint64_t end = static_cast<uint64_t>(range_begin(r + 1, n));
      std::atomic<uint64_t>& next = ranges[static_cast<size_t>(r)].next;
      uint64_t w = next.load(std::memory_order_acquire);
      for (;;) {
        if (static_cast<uint32_t>(w >> 32) != j) return -1;
        uint64_t p = w & 0xffffffffu;
        if (p >= end) break;
        if (next.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel)) return static_cast<int64_t>(p);
      }
    }
    return -1;
  }

  void finish_one(int64_t n) {
    if (finished.fetch_add(1, std::memory_order_seq_cst) + 1 == static_cast<uint32_t>(n) &&
        caller_sleeping.load(std::memory_order_seq_cst))
      futex_wake_all(&finished);
  }

  void work(int me, uint32_t j) {
    Body b = body.load(std::memory_order_relaxed);
    void* c = ctx.load(std::memory_order_relaxed);
    int64_t n = parts.load(std::memory_order_relaxed);
    for (int64_t p; (p = claim(me, j, n)) >= 0;) {
      b(c, p, n, me);
      finish_one(n);
    }
  }

  void worker(int me) {
    in_pool_body = true;
    current_thread = me;
    uint32_t seen = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      auto changed = [&] { return job.load(std::memory_order_acquire) != seen; };
      if (!spin_until(changed, kWorkerSpin)) {
        sleepers.fetch_add(1, std::memory_order_seq_cst);
        while (job.load(std::memory_order_seq_cst) == seen && !stop.load()) futex_wait(&job, seen);
        sleepers.fetch_sub(1, std::memory_order_seq_cst);
      }
      if (stop.load()) return;
      seen = job.load(std::memory_order_acquire);
      work(me, seen);
    }
  }
};

ThreadPool::ThreadPool(int threads) : threads_(std::max(1, threads)), s_(new State) {
  s_->threads = threads_;
  s_->ranges.reset(new Range[static_cast<size_t>(threads_)]);
  for (int i = 1; i < threads_; ++i) s_->workers.emplace_back([this, i] { s_->worker(i); });
  api_.run = [](void* pool, int64_t parts, void (*body)(void*, int64_t, int64_t, int), void* ctx) {
    static_cast<ThreadPool*>(pool)->run(parts, body, ctx);
  };
  api_.pool = this;
  api_.threads = threads_;
  api_.sgemm = gemm_f32;
  api_.dgemm = gemm_f64;
  api_.conv_plan = library_conv_plan;
  api_.conv_part = library_conv_part;
}

ThreadPool::~ThreadPool() {
  s_->stop.store(true);
  s_->job.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(&s_->job);
  for (auto& w : s_->workers) w.join();
  delete s_;
}

ThreadPool& ThreadPool::global() {
  // Generated code splits matmuls over this pool: OpenBLAS's own threads (f64
  // products) would be more threads than cores. (oneDNN's: runtime/gemm.cpp.)
  static ThreadPool* pool = [] {
    openblas_set_num_threads(1);
    return new ThreadPool(default_threads());  // never destroyed: workers may outlive static destructors
  }();
  return *pool;
}

bool ThreadPool::share_openmp_team(bool on) {
  if (on && !openmp().ok()) return false;
  std::lock_guard<std::mutex> lock(s_->busy);  // not while a job runs
  s_->openmp.store(on);
  return true;
}

void ThreadPool::run(int64_t parts, Body body, void* ctx) {
  if (parts <= 0) return;
  State& s = *s_;
  std::unique_lock<std::mutex> lock(s.busy, std::defer_lock);
  if (threads_ == 1 || parts == 1 || parts > INT32_MAX || in_pool_body || !lock.try_lock()) {
    // Inside a part: on this thread, whose scratch it already owns.
    int me = in_pool_body ? current_thread : 0;
    for (int64_t p = 0; p < parts; ++p) body(ctx, p, parts, me);
    return;
  }
  const bool shared = s.openmp.load(std::memory_order_relaxed);
  if (shared && openmp().in_parallel()) {  // inside one of the host's parallel regions: on this thread
    for (int64_t p = 0; p < parts; ++p) body(ctx, p, parts, 0);
    return;
  }
  const bool team = shared && Clock::now() >= s.team_again;
  // A number no worker still holds: a late one (its job long over) claims nothing.
  const uint32_t j = ++s.tag;
  s.body.store(body, std::memory_order_relaxed);
  s.ctx.store(ctx, std::memory_order_relaxed);
  s.parts.store(parts, std::memory_order_relaxed);
  s.finished.store(0, std::memory_order_relaxed);
  for (int r = 0; r < threads_; ++r)
    s.ranges[static_cast<size_t>(r)].next.store((uint64_t{j} << 32) | static_cast<uint64_t>(s.range_begin(r, parts)),
                                                 std::memory_order_relaxed);
  if (team) {
    // The parts claimed as on the pool's own threads (own range first, then
    // the others'); the team's barrier is the end of the job.
    struct Job {
      State* s;
      uint32_t j;
      Clock::time_point start;
      std::atomic<int64_t> late_us{0};  // the latest member's start, if past kTeamLate
    } job{&s, j, Clock::now()};
    openmp().parallel(
        [](void* d) {
          Job& jb = *static_cast<Job*>(d);
          const int me = openmp().thread_num();
          if (auto late = Clock::now() - jb.start; me != 0 && late > kTeamLate)
            jb.late_us.store(std::chrono::duration_cast<std::chrono::microseconds>(late).count(), std::memory_order_relaxed);
          const bool was_in = in_pool_body;
          const int was_thread = current_thread;
          in_pool_body = true, current_thread = me;
          jb.s->work(me, jb.j);
          in_pool_body = was_in, current_thread = was_thread;
        },
        &job, static_cast<unsigned>(threads_), 0);
    if (int64_t late = job.late_us.load(std::memory_order_relaxed)) {
      s.team_again = Clock::now() + kTeamBackOff;
      if (log_enabled("threads"))
        std::fprintf(stderr, "[threads] an OpenMP team member started %lld us late: the pool's own threads for %lld ms\n",
                     static_cast<long long>(late), static_cast<long long>(kTeamBackOff.count()));
    }
    return;
  }
  s.job.store(j, std::memory_order_seq_cst);
  if (s.sleepers.load(std::memory_order_seq_cst) > 0) futex_wake_all(&s.job);
  in_pool_body = true;
  s.work(0, j);
  in_pool_body = false;
  // Parts that workers hold: spin a little, then sleep until the last ends.
  auto done = [&] { return s.finished.load(std::memory_order_acquire) == static_cast<uint32_t>(parts); };
  if (!spin_until(done, kCallerSpin)) {
    s.caller_sleeping.store(1, std::memory_order_seq_cst);
    for (uint32_t f; (f = s.finished.load(std::memory_order_seq_cst)) != static_cast<uint32_t>(parts);) futex_wait(&s.finished, f);
    s.caller_sleeping.store(0, std::memory_order_relaxed);
  }
}

}  // namespace tj
