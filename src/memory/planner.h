// Static memory planning: given buffers with known lifetimes over a sequence
// of kernels (time steps 0..n-1), assign each an offset in one arena so that
// buffers alive at the same time never share bytes. Pure algorithms on plain
// numbers; the IR-facing side (computing lifetimes) lives elsewhere.
#pragma once

#include <cstdint>
#include <vector>

namespace tj {

// A buffer of `size` bytes live in kernels first..last inclusive.
struct BufferReq {
  int64_t size;
  int first;
  int last;
};

struct MemoryPlan {
  std::vector<int64_t> offsets;   // one per buffer, same order as the request
  int64_t peak_bytes = 0;         // arena size: max over buffers of offset + size
  int64_t lower_bound_bytes = 0;  // no plan can do better than this
  int64_t no_reuse_bytes = 0;     // what giving every buffer its own bytes costs
};

// Max over time t of the sum of the (raw) sizes live at t. No plan's peak is
// below it.
int64_t lower_bound_bytes(const std::vector<BufferReq>& bufs);

// Sum of all raw sizes.
int64_t no_reuse_bytes(const std::vector<BufferReq>& bufs);

// Greedy by size: largest buffers first, each at the lowest aligned offset
// that fits between the already placed buffers whose lifetimes overlap its
// own. Deterministic. Guarantees a plan_is_valid plan with offsets multiples of
// `alignment` (>= 1) and lower_bound <= peak <= sum of sizes rounded up to
// `alignment`. Zero-size buffers get offset 0. Throws Error on a negative size
// or first > last. O(n^2) time for n buffers.
MemoryPlan plan_greedy_by_size(const std::vector<BufferReq>& bufs, int64_t alignment = 64);

// True when the plan has one non-negative offset per buffer, each a multiple
// of `alignment`, no two buffers with overlapping lifetimes overlap in
// [offset, offset + size), and peak_bytes covers every buffer.
bool plan_is_valid(const std::vector<BufferReq>& bufs, const MemoryPlan& p, int64_t alignment = 64);

}  // namespace tj
