// Greedy-by-size offset planning. Placing the largest buffers first leaves
// the small ones to fill the gaps between them, which is what makes this
// simple heuristic land close to the lower bound on real networks.
#include "memory/planner.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "tensorjit/error.h"

namespace tj {
namespace {

bool lifetimes_overlap(const BufferReq& a, const BufferReq& b) { return a.first <= b.last && b.first <= a.last; }

int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

void check_request(const std::vector<BufferReq>& bufs) {
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (bufs[i].size < 0) throw Error("memory plan: buffer " + std::to_string(i) + " has a negative size");
    if (bufs[i].first > bufs[i].last)
      throw Error("memory plan: buffer " + std::to_string(i) + " ends (" + std::to_string(bufs[i].last) +
                  ") before it starts (" + std::to_string(bufs[i].first) + ")");
  }
}

}  // namespace

int64_t lower_bound_bytes(const std::vector<BufferReq>& bufs) {
  // Sweep: +size at `first`, -size at `last + 1`. At equal times the ends go
  // first, since a buffer ending at t-1 is not live at t.
  std::vector<std::pair<int64_t, int64_t>> events;
  events.reserve(2 * bufs.size());
  for (const BufferReq& b : bufs) {
    if (b.size == 0) continue;
    events.push_back({b.first, b.size});
    events.push_back({int64_t{b.last} + 1, -b.size});
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, best = 0;
  for (const auto& [t, delta] : events) {
    live += delta;
    best = std::max(best, live);
  }
  return best;
}

int64_t no_reuse_bytes(const std::vector<BufferReq>& bufs) {
  int64_t total = 0;
  for (const BufferReq& b : bufs) total += b.size;
  return total;
}

MemoryPlan plan_greedy_by_size(const std::vector<BufferReq>& bufs, int64_t alignment) {
  if (alignment < 1) throw Error("memory plan: alignment must be at least 1");
  check_request(bufs);
  const size_t n = bufs.size();

  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (bufs[a].size != bufs[b].size) return bufs[a].size > bufs[b].size;
    if (bufs[a].first != bufs[b].first) return bufs[a].first < bufs[b].first;
    return a < b;
  });

  // Sizes are padded to `alignment` for placement, so every offset computed
  // from earlier ends stays aligned; the padding is never handed out to
  // another buffer, which costs at most alignment-1 bytes per buffer.
  struct Placed {
    int64_t offset, padded;
    size_t index;
  };
  std::vector<Placed> placed;  // kept sorted by offset, so no per-buffer sort
  placed.reserve(n);

  MemoryPlan plan;
  plan.offsets.assign(n, 0);
  for (size_t i : order) {
    const BufferReq& b = bufs[i];
    if (b.size == 0) continue;  // occupies no bytes: offset 0 collides with nothing
    const int64_t padded = round_up(b.size, alignment);
    int64_t candidate = 0;
    for (const Placed& p : placed) {
      if (!lifetimes_overlap(b, bufs[p.index])) continue;
      if (p.offset >= candidate + padded) break;  // the gap before p fits
      candidate = std::max(candidate, p.offset + p.padded);
    }
    plan.offsets[i] = candidate;
    Placed entry{candidate, padded, i};
    auto at = std::upper_bound(placed.begin(), placed.end(), candidate,
                               [](int64_t off, const Placed& p) { return off < p.offset; });
    placed.insert(at, entry);
    plan.peak_bytes = std::max(plan.peak_bytes, candidate + b.size);
  }
  plan.lower_bound_bytes = lower_bound_bytes(bufs);
  plan.no_reuse_bytes = no_reuse_bytes(bufs);
  return plan;
}

bool plan_is_valid(const std::vector<BufferReq>& bufs, const MemoryPlan& p, int64_t alignment) {
  if (alignment < 1 || p.offsets.size() != bufs.size()) return false;
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (bufs[i].size < 0 || bufs[i].first > bufs[i].last) return false;
    if (p.offsets[i] < 0 || p.offsets[i] % alignment != 0) return false;
    if (p.offsets[i] + bufs[i].size > p.peak_bytes && bufs[i].size > 0) return false;
  }
  // Sorted by offset, the buffers whose bytes overlap buffer i's are the ones
  // right after it that start before it ends; the inner loop stops there.
  std::vector<size_t> by_offset;
  for (size_t i = 0; i < bufs.size(); ++i)
    if (bufs[i].size > 0) by_offset.push_back(i);
  std::sort(by_offset.begin(), by_offset.end(), [&](size_t a, size_t b) {
    return p.offsets[a] != p.offsets[b] ? p.offsets[a] < p.offsets[b] : a < b;
  });
  for (size_t x = 0; x < by_offset.size(); ++x) {
    const size_t i = by_offset[x];
    const int64_t end = p.offsets[i] + bufs[i].size;
    for (size_t y = x + 1; y < by_offset.size() && p.offsets[by_offset[y]] < end; ++y)
      if (lifetimes_overlap(bufs[i], bufs[by_offset[y]])) return false;
  }
  return true;
}

}  // namespace tj
