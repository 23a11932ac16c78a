// The communicator's collectives over ranks as threads (LocalGroup): the
// results in rank order, the same bits on every rank; a timeout, a rank
// that leaves and ranks that disagree end every waiting rank with an error
// naming the op, the rank and the sequence number. Never a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "runtime/communicator.h"

namespace tj {
namespace {

using namespace std::chrono_literals;

// Runs body(rank's communicator) on each rank's thread; the errors' texts by rank ("" when none).
std::vector<std::string> on_ranks(LocalGroup& g, const std::function<void(Communicator&)>& body) {
  std::vector<std::string> errors(static_cast<size_t>(g.size()));
  std::vector<std::thread> threads;
  for (int r = 0; r < g.size(); ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<Communicator> c = g.rank(r);
      try {
        body(*c);
      } catch (const CommError& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  return errors;
}

// Values that round differently in different orders.
float value(int rank, int64_t i) { return 1.0f / static_cast<float>(3 + 7 * rank + static_cast<int>(i)) + (rank % 2 ? 1e4f : -1e-3f); }

TEST(Communicator, CollectivesInRankOrderTheSameBitsOnEveryRank) {
  for (int n : {1, 2, 3, 4}) {
    SCOPED_TRACE(n);
    LocalGroup g(n, 10s);
    const int64_t m = 5;
    std::vector<std::vector<float>> reduced(static_cast<size_t>(n)), gathered(reduced), scattered(reduced), swapped(reduced), maxed(reduced);
    auto errors = on_ranks(g, [&](Communicator& c) {
      const size_t r = static_cast<size_t>(c.rank());
      std::vector<float> x(m), blocks(static_cast<size_t>(n * m));
      for (int64_t i = 0; i < m; ++i) x[static_cast<size_t>(i)] = value(c.rank(), i);
      for (int64_t i = 0; i < n * m; ++i) blocks[static_cast<size_t>(i)] = value(c.rank(), i);
      reduced[r] = x;
      c.all_reduce(reduced[r].data(), m, Reduction::sum);
      maxed[r] = x;
      c.all_reduce(maxed[r].data(), m, Reduction::max);
      gathered[r].resize(static_cast<size_t>(n * m));
      c.all_gather(x.data(), m, gathered[r].data());
      scattered[r].resize(static_cast<size_t>(m));
      c.reduce_scatter(blocks.data(), m, scattered[r].data(), Reduction::sum);
      swapped[r].resize(static_cast<size_t>(n * m));
      c.all_to_all(blocks.data(), m, swapped[r].data());
      c.barrier();
      EXPECT_EQ(c.history().size(), 6u);
    });
    for (const std::string& e : errors) EXPECT_EQ(e, "");
    for (int r = 0; r < n; ++r) {
      const size_t rr = static_cast<size_t>(r);
      for (int64_t i = 0; i < m; ++i) {
        float sum = value(0, i), mx = value(0, i), block = value(0, r * m + i);
        for (int k = 1; k < n; ++k) sum += value(k, i), mx = std::max(mx, value(k, i)), block += value(k, r * m + i);
        EXPECT_EQ(std::memcmp(&reduced[rr][static_cast<size_t>(i)], &sum, 4), 0) << r << " " << i;
        EXPECT_EQ(maxed[rr][static_cast<size_t>(i)], mx);
        EXPECT_EQ(std::memcmp(&scattered[rr][static_cast<size_t>(i)], &block, 4), 0);
        for (int k = 0; k < n; ++k) {
          EXPECT_EQ(gathered[rr][static_cast<size_t>(k * m + i)], value(k, i));
          EXPECT_EQ(swapped[rr][static_cast<size_t>(k * m + i)], value(k, r * m + i));  // block k from rank k
        }
      }
    }
  }
}

TEST(Communicator, ATimeoutEndsTheWaitWithTheOpRankAndSequence) {
  LocalGroup g(2, 200ms);
  const auto t0 = std::chrono::steady_clock::now();
  auto errors = on_ranks(g, [&](Communicator& c) {
    float x = 1;
    c.barrier();
    if (c.rank() == 0) c.all_reduce(&x, 1, Reduction::sum);  // rank 1 never comes
  });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_NE(errors[0].find("all_reduce #2 on rank 0 of 2: timed out after 200 ms waiting for rank(s) 1"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("last collectives of rank 0, oldest first:\n  #1 barrier of 0 floats\n  #2 all_reduce of 1 floats (not done)\n"),
            std::string::npos)
      << errors[0];
  EXPECT_EQ(errors[1], "");
}

TEST(Communicator, ARankThatLeavesEndsItsPeersWaitsAtOnce) {
  LocalGroup g(3, 30s);
  const auto t0 = std::chrono::steady_clock::now();
  auto errors = on_ranks(g, [&](Communicator& c) {
    std::vector<float> x(4, 1.0f);
    for (int step = 0; step < 3; ++step) {
      if (c.rank() == 2 && step == 1) {
        g.leave(2);  // dies
        return;
      }
      c.all_reduce(x.data(), 4, Reduction::sum);
    }
  });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);  // not the 30 s timeout
  for (int r : {0, 1}) EXPECT_NE(errors[static_cast<size_t>(r)].find("all_reduce #2 on rank " + std::to_string(r) + " of 3: rank 2 left the group"), std::string::npos) << errors[static_cast<size_t>(r)];
  EXPECT_EQ(errors[2], "");
  // The group stays broken: a later call fails at once.
  std::unique_ptr<Communicator> c = g.rank(0);
  EXPECT_THROW(c->barrier(), CommError);
}

TEST(Communicator, RanksThatCallDifferentCollectivesFail) {
  LocalGroup g(2, 10s);
  auto errors = on_ranks(g, [&](Communicator& c) {
    std::vector<float> x(2, 1.0f), out(4);
    if (c.rank() == 0) c.all_reduce(x.data(), 2, Reduction::sum);
    else c.all_gather(x.data(), 2, out.data());
  });
  for (const std::string& e : errors) EXPECT_NE(e.find(" called "), std::string::npos) << e;
}

TEST(Communicator, HistoryIsBounded) {
  LocalGroup g(1, 1s);
  std::unique_ptr<Communicator> c = g.rank(0);
  for (int i = 0; i < 40; ++i) c->barrier();
  ASSERT_EQ(c->history().size(), Communicator::kHistory);
  EXPECT_EQ(c->history().front().seq, 40 - Communicator::kHistory + 1);
  EXPECT_THROW(g.rank(1), Error);
  EXPECT_THROW(LocalGroup(0, 1s), Error);
}

}  // namespace
}  // namespace tj
