// Memory planning and memory-aware kernel ordering on plain numbers: the spec
// examples with exact peaks, random problems checked against the invariants
// (validity, lower bound, no-reuse bound, topological order), and sizes large
// enough to catch an accidentally quadratic-with-a-big-constant algorithm.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "memory/planner.h"
#include "memory/reorder.h"
#include "reference/random_inputs.h"
#include "tensorjit/error.h"

namespace tj {
namespace {

constexpr int64_t MiB = int64_t{1} << 20;
constexpr int64_t KiB = int64_t{1} << 10;

int64_t rand_int(Rng& rng, int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng.next() % uint64_t(hi - lo + 1)); }

std::vector<BufferReq> random_buffers(Rng& rng, int count, int horizon, int64_t max_size) {
  std::vector<BufferReq> bufs;
  for (int i = 0; i < count; ++i) {
    const int first = static_cast<int>(rand_int(rng, 0, horizon));
    const int last = static_cast<int>(rand_int(rng, first, horizon));
    bufs.push_back({rand_int(rng, 1, max_size), first, last});
  }
  return bufs;
}

bool is_topological(const std::vector<KernelNode>& kernels, const std::vector<ScheduledBuffer>& buffers,
                    const std::vector<int>& order) {
  const int n = static_cast<int>(kernels.size());
  if (static_cast<int>(order.size()) != n) return false;
  std::vector<int> pos(n, -1);
  for (int i = 0; i < n; ++i) {
    if (order[i] < 0 || order[i] >= n || pos[order[i]] != -1) return false;
    pos[order[i]] = i;
  }
  for (int k = 0; k < n; ++k)
    for (int d : kernels[k].deps)
      if (pos[d] >= pos[k]) return false;
  for (const ScheduledBuffer& b : buffers)
    for (int c : b.consumers)
      if (b.producer >= 0 && c != b.producer && pos[b.producer] >= pos[c]) return false;
  return true;
}

// A random DAG: each kernel depends on a few earlier ones and produces one
// buffer read by some later kernels; a few buffers are unplanned inputs.
void random_dag(Rng& rng, int n, std::vector<KernelNode>& kernels, std::vector<ScheduledBuffer>& buffers) {
  kernels.assign(n, {});
  buffers.clear();
  for (int k = 0; k < n; ++k) {
    ScheduledBuffer out{rand_int(rng, 0, 1000) * 1000, k, {}};
    const int64_t fanout = rand_int(rng, 0, 3);
    for (int j = 0; j < fanout && k + 1 < n; ++j) out.consumers.push_back(static_cast<int>(rand_int(rng, k + 1, n - 1)));
    buffers.push_back(out);
    if (k > 0 && rng.uniform() < 0.3) kernels[k].deps.push_back(static_cast<int>(rand_int(rng, 0, k - 1)));
  }
  buffers.push_back({12345, -1, {0, n - 1}});  // an input: ignored for the peak
}

// --- planner ---------------------------------------------------------------

TEST(MemoryPlanner, SpecExampleHitsLowerBound) {
  // A 100 MiB live 0-2, B 50 MiB 1-3, C 80 MiB 3-4, D 60 MiB 2-4. At t=2 A, B
  // and D are live: 210 MiB, the most at any time.
  const std::vector<BufferReq> bufs = {{100 * MiB, 0, 2}, {50 * MiB, 1, 3}, {80 * MiB, 3, 4}, {60 * MiB, 2, 4}};
  EXPECT_EQ(lower_bound_bytes(bufs), 210 * MiB);
  EXPECT_EQ(no_reuse_bytes(bufs), 290 * MiB);
  const MemoryPlan p = plan_greedy_by_size(bufs);
  ASSERT_TRUE(plan_is_valid(bufs, p));
  EXPECT_EQ(p.peak_bytes, 210 * MiB);
  EXPECT_EQ(p.lower_bound_bytes, 210 * MiB);
  EXPECT_EQ(p.no_reuse_bytes, 290 * MiB);
  // A first at 0; C (dead while A lives) reuses A's bytes; D above A; B above D.
  EXPECT_EQ(p.offsets, (std::vector<int64_t>{0, 160 * MiB, 0, 100 * MiB}));
}

TEST(MemoryPlanner, RandomProblemsAreValidAndBounded) {
  Rng rng(42);
  const int64_t alignments[] = {1, 64, 4096};
  for (int iter = 0; iter < 200; ++iter) {
    const auto bufs = random_buffers(rng, static_cast<int>(rand_int(rng, 1, 60)), 30, 1000000);
    const int64_t align = alignments[iter % 3];
    const MemoryPlan p = plan_greedy_by_size(bufs, align);
    ASSERT_TRUE(plan_is_valid(bufs, p, align)) << "iteration " << iter;
    int64_t padded_total = 0;
    for (size_t i = 0; i < bufs.size(); ++i) {
      ASSERT_EQ(p.offsets[i] % align, 0);
      padded_total += (bufs[i].size + align - 1) / align * align;
    }
    EXPECT_GE(p.peak_bytes, p.lower_bound_bytes) << "iteration " << iter;
    EXPECT_LE(p.peak_bytes, padded_total) << "iteration " << iter;
    EXPECT_EQ(p.lower_bound_bytes, lower_bound_bytes(bufs));
    EXPECT_EQ(p.no_reuse_bytes, no_reuse_bytes(bufs));
  }
}

TEST(MemoryPlanner, DisjointLifetimesShareBytes) {
  // A chain of buffers each dying before the next is born needs one slot.
  std::vector<BufferReq> bufs;
  for (int t = 0; t < 10; ++t) bufs.push_back({1000, t, t});
  const MemoryPlan p = plan_greedy_by_size(bufs);
  EXPECT_TRUE(plan_is_valid(bufs, p));
  EXPECT_EQ(p.peak_bytes, 1000);
  EXPECT_EQ(p.lower_bound_bytes, 1000);
  EXPECT_EQ(p.no_reuse_bytes, 10000);
}

TEST(MemoryPlanner, SizesArePaddedForPlacementOnly) {
  // Two overlapping 1-byte buffers: the second starts at the next aligned
  // offset, the peak counts its real size, the bounds count raw sizes.
  const std::vector<BufferReq> bufs = {{1, 0, 1}, {1, 1, 2}};
  const MemoryPlan p = plan_greedy_by_size(bufs, 64);
  EXPECT_TRUE(plan_is_valid(bufs, p, 64));
  EXPECT_EQ(p.offsets, (std::vector<int64_t>{0, 64}));
  EXPECT_EQ(p.peak_bytes, 65);
  EXPECT_EQ(p.lower_bound_bytes, 2);
  EXPECT_EQ(p.no_reuse_bytes, 2);
}

TEST(MemoryPlanner, ZeroSizeBuffersCollideWithNothing) {
  const std::vector<BufferReq> bufs = {{0, 0, 5}, {128, 0, 5}, {0, 2, 3}, {64, 1, 4}};
  const MemoryPlan p = plan_greedy_by_size(bufs);
  EXPECT_TRUE(plan_is_valid(bufs, p));
  EXPECT_EQ(p.offsets[0], 0);
  EXPECT_EQ(p.offsets[2], 0);
  EXPECT_EQ(p.peak_bytes, 192);
  EXPECT_EQ(lower_bound_bytes({{0, 0, 0}}), 0);
  EXPECT_EQ(plan_greedy_by_size({}).peak_bytes, 0);
}

TEST(MemoryPlanner, ValidityCheckCatchesBadPlans) {
  const std::vector<BufferReq> bufs = {{100, 0, 2}, {100, 2, 4}, {100, 3, 5}};
  MemoryPlan good{{0, 128, 0}, 228, 200, 300};
  EXPECT_TRUE(plan_is_valid(bufs, good));  // 0 and 2 share bytes but never live together
  MemoryPlan overlap = good;
  overlap.offsets = {0, 64, 192};  // 0 and 1 are both live at t=2 and share [64, 100)
  overlap.peak_bytes = 292;
  EXPECT_FALSE(plan_is_valid(bufs, overlap));
  MemoryPlan same = good;
  same.offsets = {0, 0, 128};  // identical offsets, overlapping lifetimes
  EXPECT_FALSE(plan_is_valid(bufs, same));
  MemoryPlan misaligned = good;
  misaligned.offsets = {0, 100, 0};  // no overlap, but 100 is not a multiple of 64
  misaligned.peak_bytes = 200;
  EXPECT_FALSE(plan_is_valid(bufs, misaligned));
  EXPECT_TRUE(plan_is_valid(bufs, misaligned, 4));
  MemoryPlan short_peak = good;
  short_peak.peak_bytes = 200;  // buffer 1 ends at 228
  EXPECT_FALSE(plan_is_valid(bufs, short_peak));
  MemoryPlan missing = good;
  missing.offsets.pop_back();
  EXPECT_FALSE(plan_is_valid(bufs, missing));
}

TEST(MemoryPlanner, RejectsMalformedRequests) {
  EXPECT_THROW(plan_greedy_by_size({{-1, 0, 0}}), Error);
  EXPECT_THROW(plan_greedy_by_size({{8, 3, 2}}), Error);
  EXPECT_THROW(plan_greedy_by_size({{8, 0, 0}}, 0), Error);
}

TEST(MemoryPlanner, FiveThousandBuffers) {
  Rng rng(7);
  const auto bufs = random_buffers(rng, 5000, 2000, 1 << 24);
  const MemoryPlan p = plan_greedy_by_size(bufs);
  EXPECT_TRUE(plan_is_valid(bufs, p));
  EXPECT_GE(p.peak_bytes, p.lower_bound_bytes);
}

// --- reordering --------------------------------------------------------------

constexpr int64_t kBig = 2048 * 16384 * 4;  // a [2048,16384] f32 activation: 128 MiB
constexpr int64_t kSum = 2048 * 4;          // its row sum: 8 KiB

// Four branches: producer p_i makes a 128 MiB buffer, its row sum s_i reads it
// and makes 8 KiB, and kernel 8 combines the four sums into a 4-byte result.
void four_branches(const int producer[4], const int sum[4], std::vector<KernelNode>& kernels,
                   std::vector<ScheduledBuffer>& buffers) {
  kernels.assign(9, {});
  buffers.clear();
  for (int i = 0; i < 4; ++i) {
    kernels[sum[i]].deps = {producer[i]};
    kernels[8].deps.push_back(sum[i]);
    buffers.push_back({kBig, producer[i], {sum[i]}});
    buffers.push_back({kSum, sum[i], {8}});
  }
  buffers.push_back({4, 8, {}});
}

TEST(MemoryReorder, BranchesFinishOneAtATime) {
  // The spec's numbering: kernel 2i produces, 2i+1 sums.
  const int producer[4] = {0, 2, 4, 6}, sum[4] = {1, 3, 5, 7};
  std::vector<KernelNode> kernels;
  std::vector<ScheduledBuffer> buffers;
  four_branches(producer, sum, kernels, buffers);
  const std::vector<int> breadth_first = {0, 2, 4, 6, 1, 3, 5, 7, 8};
  const int64_t before = peak_live_bytes(kernels, buffers, breadth_first);
  EXPECT_EQ(before, 4 * kBig + kSum);
  const std::vector<int> order = reorder_for_memory(kernels, buffers);
  ASSERT_TRUE(is_topological(kernels, buffers, order));
  const int64_t after = peak_live_bytes(kernels, buffers, order);
  EXPECT_EQ(after, kBig + 4 * kSum);
  EXPECT_GE(before, 3 * after);
}

TEST(MemoryReorder, BranchesNumberedBreadthFirst) {
  // Same graph, but numbered so the original order 0..8 is the breadth-first
  // one: the scheduler itself has to find the depth-first order.
  const int producer[4] = {0, 1, 2, 3}, sum[4] = {4, 5, 6, 7};
  std::vector<KernelNode> kernels;
  std::vector<ScheduledBuffer> buffers;
  four_branches(producer, sum, kernels, buffers);
  const std::vector<int> original = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(peak_live_bytes(kernels, buffers, original), 4 * kBig + kSum);
  const std::vector<int> order = reorder_for_memory(kernels, buffers);
  ASSERT_TRUE(is_topological(kernels, buffers, order));
  EXPECT_EQ(order, (std::vector<int>{0, 4, 1, 5, 2, 6, 3, 7, 8}));
  EXPECT_EQ(peak_live_bytes(kernels, buffers, order), kBig + 4 * kSum);
}

TEST(MemoryReorder, GrowingBranchesStillFinishOneAtATime) {
  // a_i makes X read by b_i and c_i; b_i makes 2X read by c_i; c_i frees both.
  // Every step before c_i allocates, and b_i allocates more than a new branch
  // start, so picking by net bytes alone starts all four branches (6X+); depth
  // first holds one branch at a time (3X).
  const int64_t X = 64 * MiB;
  std::vector<KernelNode> kernels(13);
  std::vector<ScheduledBuffer> buffers;
  for (int i = 0; i < 4; ++i) {
    const int a = i, b = 4 + i, c = 8 + i;  // numbered breadth first
    buffers.push_back({X, a, {b, c}});
    buffers.push_back({2 * X, b, {c}});
    buffers.push_back({kSum, c, {12}});
  }
  const std::vector<int> order = reorder_for_memory(kernels, buffers);
  ASSERT_TRUE(is_topological(kernels, buffers, order));
  EXPECT_LE(peak_live_bytes(kernels, buffers, order), 3 * X + 4 * kSum);
}

TEST(MemoryReorder, PeakLiveBytesFollowsTheDefinition) {
  std::vector<KernelNode> kernels(3);
  kernels[1].deps = {0};
  kernels[2].deps = {1};
  const std::vector<ScheduledBuffer> buffers = {
      {100, 0, {2}},      // live at positions 0..2
      {10, 1, {}},        // no consumers: live only at its producer
      {1000, -1, {0, 2}}, // an input: not planned, not counted
  };
  EXPECT_EQ(peak_live_bytes(kernels, buffers, {0, 1, 2}), 110);
  EXPECT_THROW(peak_live_bytes(kernels, buffers, {0, 1}), Error);
  EXPECT_THROW(peak_live_bytes(kernels, buffers, {0, 1, 1}), Error);
}

TEST(MemoryReorder, RandomDagsGiveValidOrdersNoWorseThanOriginal) {
  Rng rng(3);
  for (int iter = 0; iter < 200; ++iter) {
    std::vector<KernelNode> kernels;
    std::vector<ScheduledBuffer> buffers;
    random_dag(rng, static_cast<int>(rand_int(rng, 1, 80)), kernels, buffers);
    const std::vector<int> order = reorder_for_memory(kernels, buffers);
    ASSERT_TRUE(is_topological(kernels, buffers, order)) << "iteration " << iter;
    std::vector<int> original(kernels.size());
    std::iota(original.begin(), original.end(), 0);
    EXPECT_LE(peak_live_bytes(kernels, buffers, order), peak_live_bytes(kernels, buffers, original))
        << "iteration " << iter;
  }
}

TEST(MemoryReorder, DataEdgesCountAsDependencies) {
  // No explicit deps, but kernel 0 reads what kernel 1 writes.
  std::vector<KernelNode> kernels(2);
  const std::vector<ScheduledBuffer> buffers = {{8, 1, {0}}};
  EXPECT_EQ(reorder_for_memory(kernels, buffers), (std::vector<int>{1, 0}));
}

TEST(MemoryReorder, RejectsCyclesAndBadIndices) {
  std::vector<KernelNode> cycle(2);
  cycle[0].deps = {1};
  cycle[1].deps = {0};
  EXPECT_THROW(reorder_for_memory(cycle, {}), Error);
  std::vector<KernelNode> one(1);
  EXPECT_THROW(reorder_for_memory(one, {{8, 0, {3}}}), Error);
  EXPECT_THROW(reorder_for_memory(one, {{8, 2, {}}}), Error);
  EXPECT_TRUE(reorder_for_memory({}, {}).empty());
}

TEST(MemoryReorder, FiveThousandKernels) {
  // A random DAG, and 2500 independent two-kernel branches (the widest ready
  // set, the worst case for the selection scan).
  Rng rng(11);
  std::vector<KernelNode> kernels;
  std::vector<ScheduledBuffer> buffers;
  random_dag(rng, 5000, kernels, buffers);
  EXPECT_TRUE(is_topological(kernels, buffers, reorder_for_memory(kernels, buffers)));

  kernels.assign(5000, {});
  buffers.clear();
  for (int i = 0; i < 2500; ++i) {
    kernels[2500 + i].deps = {i};
    buffers.push_back({kBig, i, {2500 + i}});
  }
  const std::vector<int> order = reorder_for_memory(kernels, buffers);
  EXPECT_TRUE(is_topological(kernels, buffers, order));
  EXPECT_EQ(peak_live_bytes(kernels, buffers, order), kBig);
}

}  // namespace
}  // namespace tj
