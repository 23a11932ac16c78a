// The threads that generated code runs on: one pool per process, sized to
// the CPUs this process may use, shared by every executable (and instead of
// OpenBLAS's own threads, which are set to one).
//
// Built to degrade gracefully on a busy machine. A parallel loop is split
// into parts; each thread first takes the parts of its own range (the same
// ones every call, so each core keeps its share of the weights in its cache)
// and then takes whatever other ranges still have. The calling thread works
// too, so a worker that the OS has descheduled costs only the part it holds,
// never a whole time slice per barrier: when no worker turns up, the caller
// does everything alone. Idle workers spin for a bounded time and then sleep
// in the kernel (futex), so they do not steal the cores they would wait for.
//
//   ThreadPool::global().run(parts, body, ctx);   // body(ctx, part, parts, thread)
#pragma once

#include <cstdint>

#include "codegen/abi.h"  // tj_runtime_api

namespace tj {

// $TJ_NUM_THREADS (1 to 1024; anything else is an error), else usable_cpus().
int default_threads();

class ThreadPool {
 public:
  using Body = void (*)(void* ctx, int64_t part, int64_t parts, int thread);

  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The process's pool, of default_threads() threads. Created on first use.
  static ThreadPool& global();

  int threads() const { return threads_; }
  // Runs body(ctx, p, parts, thread) for every p in [0, parts), each once,
  // and returns when all are done. `thread` is in [0, threads()): the caller
  // is 0, and no two parts run at once on the same `thread`. A call from
  // inside a body, or while another thread is using the pool, runs every
  // part on the calling thread (as thread 0 of its own).
  void run(int64_t parts, Body body, void* ctx);
  // The same with a callable f(part, parts, thread).
  template <class F>
  void run_parts(int64_t parts, const F& f) {
    run(parts, [](void* c, int64_t p, int64_t n, int th) { (*static_cast<const F*>(c))(p, n, th); }, const_cast<F*>(&f));
  }
  // Jobs on the OpenMP team of the process (libgomp's, when something loaded
  // it) instead of this pool's own threads: inside a host that runs its own
  // operators on OpenMP (torch), one set of threads for both, not two that
  // take the cores from each other. Parts are claimed as on the pool's own
  // threads, but a job ends at the team's barrier, which waits for a member
  // the OS has descheduled: when one starts late (a busy machine), jobs go
  // to the pool's own threads for half a second before the team is tried
  // again. False (and no change) when there is no such runtime.
  bool share_openmp_team(bool on);
  // For generated code (tj_runtime_api).
  const tj_runtime_api* api() const { return &api_; }

  struct State;

 private:
  int threads_;
  State* s_;
  tj_runtime_api api_;
};

}  // namespace tj
