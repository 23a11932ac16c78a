// The thread pool: every part runs once, on a thread index below the pool's
// size that no other part holds at the same time; nested and concurrent
// calls; jobs on the OpenMP team; the thread count from the environment; the measured choice
// whether small kernels split over the pool.
#include "runtime/split_choice.h"
#include "runtime/thread_pool.h"
#include "support/cpus.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "tensorjit/error.h"

namespace tj {
namespace {

struct Record {
  std::vector<std::atomic<int>> runs, busy;
  std::atomic<int> overlaps{0}, bad_thread{0}, bad_parts{0};
  int threads;
  int64_t parts;
  Record(int threads, int64_t parts) : runs(static_cast<size_t>(parts)), busy(static_cast<size_t>(threads)), threads(threads), parts(parts) {}
};

void record(void* c, int64_t part, int64_t parts, int thread) {
  auto* r = static_cast<Record*>(c);
  if (thread < 0 || thread >= r->threads) {
    ++r->bad_thread;
    return;
  }
  if (parts != r->parts) ++r->bad_parts;
  if (r->busy[static_cast<size_t>(thread)].fetch_add(1) != 0) ++r->overlaps;
  r->runs[static_cast<size_t>(part)].fetch_add(1);
  volatile int spin = 0;
  for (int i = 0; i < (part % 7) * 200; ++i) spin = spin + i;  // uneven parts
  r->busy[static_cast<size_t>(thread)].fetch_sub(1);
}

void expect_each_once(ThreadPool& pool, int64_t parts) {
  Record r(pool.threads(), parts);
  pool.run(parts, record, &r);
  for (int64_t p = 0; p < parts; ++p) EXPECT_EQ(r.runs[static_cast<size_t>(p)].load(), 1) << "part " << p << " of " << parts;
  EXPECT_EQ(r.overlaps.load(), 0);
  EXPECT_EQ(r.bad_thread.load(), 0);
  EXPECT_EQ(r.bad_parts.load(), 0);
}

TEST(ThreadPool, EveryPartRunsOnceOnAThreadOfItsOwn) {
  // More threads than this machine's cores too.
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (int64_t parts : {0, 1, 2, 3, 7, 64, 1000})
      for (int rep = 0; rep < 20; ++rep) expect_each_once(pool, parts);
  }
}

// Jobs back to back, with pauses long enough for the workers to fall asleep
// between some of them (the futex path).
TEST(ThreadPool, WorkersThatSleptComeBack) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 10; ++rep) {
    expect_each_once(pool, 12);
    if (rep % 3 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// Runs nested inside `outer` parts: each inner part on its outer part's
// thread (whose scratch it holds), and some outer parts on other threads.
void expect_nested_runs_stay_on_their_thread(ThreadPool& pool, int64_t outer, int64_t inner) {
  struct Ctx {
    ThreadPool* pool;
    int64_t inner;
    std::atomic<int> wrong{0}, ran{0}, elsewhere{0};
  } ctx{&pool, inner};
  pool.run(
      outer,
      [](void* c, int64_t, int64_t, int thread) {
        auto* x = static_cast<Ctx*>(c);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));  // time for the other threads to take parts
        x->elsewhere += thread != 0;
        struct Inner {
          Ctx* x;
          int outer;
        } in{x, thread};
        x->pool->run(
            x->inner,
            [](void* c2, int64_t, int64_t, int t2) {
              auto* i = static_cast<Inner*>(c2);
              if (t2 != i->outer) ++i->x->wrong;  // the scratch of another thread
              ++i->x->ran;
            },
            &in);
      },
      &ctx);
  EXPECT_EQ(ctx.ran.load(), outer * inner);
  EXPECT_GT(ctx.elsewhere.load(), 0);
  EXPECT_EQ(ctx.wrong.load(), 0);
}

TEST(ThreadPool, NestedRunsStayOnTheirThread) {
  ThreadPool pool(4);
  expect_nested_runs_stay_on_their_thread(pool, 8, 5);
}

// On the process's OpenMP team (as inside torch): the same guarantees, the
// team's threads taking parts, nested runs on their thread, and back.
TEST(ThreadPool, OnTheOpenMpTeam) {
  ThreadPool pool(3);
  ASSERT_TRUE(pool.share_openmp_team(true));  // libgomp is loaded: oneDNN runs on it
  for (int64_t parts : {0, 1, 2, 3, 7, 64, 1000})
    for (int rep = 0; rep < 20; ++rep) expect_each_once(pool, parts);
  expect_nested_runs_stay_on_their_thread(pool, 6, 4);
  // Back on its own threads, and again, with workers that slept between.
  for (bool team : {false, true, false}) {
    ASSERT_TRUE(pool.share_openmp_team(team));
    for (int rep = 0; rep < 5; ++rep) {
      expect_each_once(pool, 12);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

// Callers on several threads at once share one pool: each job complete.
TEST(ThreadPool, ConcurrentCallers) {
  ThreadPool pool(2);
  std::atomic<int> failures{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 200; ++rep) {
        std::vector<std::atomic<int>> runs(16);
        pool.run(
            16, [](void* p, int64_t part, int64_t, int) { (*static_cast<std::vector<std::atomic<int>>*>(p))[static_cast<size_t>(part)]++; },
            &runs);
        for (auto& r : runs) failures += r.load() != 1;
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ThreadPool, ThreadCountFromTheEnvironment) {
  int cpus = usable_cpus();
  EXPECT_GE(cpus, 1);
  EXPECT_LE(cpus, static_cast<int>(std::thread::hardware_concurrency()));
  const char* old = std::getenv("TJ_NUM_THREADS");
  std::string saved = old ? old : "";
  unsetenv("TJ_NUM_THREADS");
  EXPECT_EQ(default_threads(), cpus);
  setenv("TJ_NUM_THREADS", "5", 1);
  EXPECT_EQ(default_threads(), 5);
  for (const char* bad : {"0", "-1", "two", "3x", "100000"}) {
    setenv("TJ_NUM_THREADS", bad, 1);
    EXPECT_THROW(default_threads(), Error) << bad;
  }
  if (old) setenv("TJ_NUM_THREADS", saved.c_str(), 1);
  else unsetenv("TJ_NUM_THREADS");
}

// The split choice alternates the two ways while it measures (the first
// calls untimed), keeps the faster by median, and measures again later.
TEST(SplitChoice, KeepsTheFasterWayAndMeasuresAgain) {
  SplitChoice c;
  auto drive = [&](double split_s, double alone_s, int64_t calls) {
    int split = 0;
    for (int64_t i = 0; i < calls; ++i) {
      bool s = c.next();
      split += s;
      if (c.timing()) c.record(s ? split_s : alone_s);
    }
    return split;
  };
  // While measuring, both ways run, alternately.
  int64_t probe = 2 * SplitChoice::kProbeCalls + SplitChoice::kWarmupCalls;
  EXPECT_EQ(drive(5e-6, 8e-6, probe), probe / 2);
  EXPECT_TRUE(c.choice());
  // Then the faster way alone, until it measures again.
  EXPECT_EQ(drive(5e-6, 8e-6, SplitChoice::kExploitCalls - 1), SplitChoice::kExploitCalls - 1);
  // The machine changed: splitting is now slower, and the next measurement says so.
  drive(12e-6, 8e-6, 2 * SplitChoice::kProbeCalls + 2);
  EXPECT_FALSE(c.choice());
  EXPECT_EQ(drive(12e-6, 8e-6, 100), 0);
}

}  // namespace
}  // namespace tj

