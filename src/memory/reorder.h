// Kernel ordering for memory: pick a valid execution order of the kernels that
// keeps the bytes live at once low, so the planner has less to fit. Pure
// algorithms on plain numbers, independent of the IR.
#pragma once

#include <cstdint>
#include <vector>

namespace tj {

struct KernelNode {
  std::vector<int> deps;  // kernels that must run before this one
};

// A buffer written by `producer` and read by `consumers`. Producer -1 means it
// exists before kernel 0 (an input, a weight); such buffers are not planned
// and count for nothing here.
struct ScheduledBuffer {
  int64_t size;
  int producer;
  std::vector<int> consumers;
};

// A permutation of 0..n-1 in which every kernel comes after its deps and
// after the producers of the buffers it consumes. List scheduling that prefers
// the ready kernel freeing the most bytes net, then the one that continues the
// most recent work (depth first), then the original order. Its peak_live_bytes
// is never above the original order's when that order is itself valid, and on
// a tie the original order is returned. Throws Error on a dependency cycle or
// an out-of-range index. O(n * ready + edges).
std::vector<int> reorder_for_memory(const std::vector<KernelNode>& kernels, const std::vector<ScheduledBuffer>& buffers);

// Max over positions of the bytes live there, where a planned buffer is live
// from its producer's position to its last consumer's position inclusive (only
// at its producer when it has no consumers). `order` must be a permutation of
// 0..n-1 (throws Error otherwise); it is not checked against the deps.
int64_t peak_live_bytes(const std::vector<KernelNode>& kernels, const std::vector<ScheduledBuffer>& buffers,
                        const std::vector<int>& order);

}  // namespace tj
