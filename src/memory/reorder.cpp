// Memory-aware kernel ordering by list scheduling. A pure "free the most
// bytes" greedy gets stuck when every way forward allocates: it then takes the
// cheapest start, which is often the start of yet another branch, and ends up
// holding the first buffer of every branch at once. Preferring the kernel that
// continues the most recent work (depth first) finishes a branch before the
// next one starts. Two policies differ in how strongly they prefer that, and
// neither wins on every graph, so both run, together with the original order,
// and the lowest peak wins; scheduling is cheap next to what a smaller arena
// saves.
#include "memory/reorder.h"

#include <algorithm>
#include <string>

#include "tensorjit/error.h"

namespace tj {
namespace {

struct Problem {
  int n = 0;
  std::vector<std::vector<int>> succs;  // deps and producer->consumer edges
  std::vector<int> indegree;            // counts repeated edges, as succs does
  std::vector<int64_t> size;            // per buffer; 0 for unplanned ones
  std::vector<std::vector<int>> consumers;  // distinct, without the producer; empty if unplanned
  std::vector<std::vector<int>> reads;      // per kernel: planned buffers it consumes
  std::vector<int64_t> held_alloc;          // per kernel: bytes it produces that outlive it
  bool original_order_valid = true;         // every edge goes forward in 0..n-1
};

void check_kernel(int k, int n, const std::string& what) {
  if (k < 0 || k >= n) throw Error("kernel order: " + what + " refers to kernel " + std::to_string(k) + " of " + std::to_string(n));
}

Problem build(const std::vector<KernelNode>& kernels, const std::vector<ScheduledBuffer>& buffers) {
  Problem p;
  p.n = static_cast<int>(kernels.size());
  p.succs.resize(p.n);
  p.indegree.assign(p.n, 0);
  p.reads.resize(p.n);
  p.held_alloc.assign(p.n, 0);
  auto edge = [&](int from, int to) {
    p.succs[from].push_back(to);
    ++p.indegree[to];
    if (from >= to) p.original_order_valid = false;
  };
  for (int k = 0; k < p.n; ++k)
    for (int d : kernels[k].deps) {
      check_kernel(d, p.n, "a dep of kernel " + std::to_string(k));
      edge(d, k);
    }
  p.size.assign(buffers.size(), 0);
  p.consumers.resize(buffers.size());
  for (size_t b = 0; b < buffers.size(); ++b) {
    const ScheduledBuffer& buf = buffers[b];
    if (buf.size < 0) throw Error("kernel order: buffer " + std::to_string(b) + " has a negative size");
    for (int c : buf.consumers) check_kernel(c, p.n, "a consumer of buffer " + std::to_string(b));
    if (buf.producer == -1) continue;
    check_kernel(buf.producer, p.n, "the producer of buffer " + std::to_string(b));
    std::vector<int>& cons = p.consumers[b];
    for (int c : buf.consumers)
      if (c != buf.producer) cons.push_back(c);
    std::sort(cons.begin(), cons.end());
    cons.erase(std::unique(cons.begin(), cons.end()), cons.end());
    p.size[b] = buf.size;
    // Reading a buffer means running after its producer, deps or not.
    for (int c : cons) {
      edge(buf.producer, c);
      p.reads[c].push_back(static_cast<int>(b));
    }
    // Without consumers it dies where it is born and changes nothing after.
    if (!cons.empty()) p.held_alloc[buf.producer] += buf.size;
  }
  return p;
}

enum class Policy {
  net_first,    // net freed bytes, then depth first, then original order
  depth_first,  // kernels that free bytes first; otherwise depth first, then net
};

std::vector<int> list_schedule(const Problem& p, Policy policy) {
  std::vector<int> indegree = p.indegree;
  std::vector<int> remaining(p.consumers.size());
  std::vector<int64_t> frees(p.n, 0);  // bytes whose last unscheduled consumer is k
  for (size_t b = 0; b < p.consumers.size(); ++b) {
    remaining[b] = static_cast<int>(p.consumers[b].size());
    if (remaining[b] == 1) frees[p.consumers[b][0]] += p.size[b];
  }
  std::vector<char> scheduled(p.n, 0);
  // The step at which a kernel became ready is the position of its last
  // scheduled predecessor: the larger, the more recent the work it continues.
  std::vector<int> ready_at(p.n, -1);
  std::vector<int> ready;
  for (int k = 0; k < p.n; ++k)
    if (indegree[k] == 0) ready.push_back(k);

  auto net = [&](int k) { return frees[k] - p.held_alloc[k]; };
  auto better = [&](int a, int b) {
    const int64_t na = net(a), nb = net(b);
    if (policy == Policy::depth_first) {
      if ((na > 0) != (nb > 0)) return na > 0;
      if (na <= 0 && ready_at[a] != ready_at[b]) return ready_at[a] > ready_at[b];
    }
    if (na != nb) return na > nb;
    if (ready_at[a] != ready_at[b]) return ready_at[a] > ready_at[b];
    return a < b;
  };

  std::vector<int> order;
  order.reserve(p.n);
  for (int step = 0; step < p.n; ++step) {
    if (ready.empty()) throw Error("kernel order: the dependencies form a cycle");
    size_t best = 0;
    for (size_t i = 1; i < ready.size(); ++i)
      if (better(ready[i], ready[best])) best = i;
    const int k = ready[best];
    ready[best] = ready.back();
    ready.pop_back();
    order.push_back(k);
    scheduled[k] = 1;
    for (int b : p.reads[k])
      if (--remaining[b] == 1)
        for (int c : p.consumers[b])
          if (!scheduled[c]) frees[c] += p.size[b];
    for (int s : p.succs[k])
      if (--indegree[s] == 0) {
        ready.push_back(s);
        ready_at[s] = step;
      }
  }
  return order;
}

}  // namespace

std::vector<int> reorder_for_memory(const std::vector<KernelNode>& kernels, const std::vector<ScheduledBuffer>& buffers) {
  const Problem p = build(kernels, buffers);
  std::vector<std::vector<int>> candidates;
  if (p.original_order_valid) {
    std::vector<int> original(p.n);
    for (int k = 0; k < p.n; ++k) original[k] = k;
    candidates.push_back(std::move(original));  // first, so it wins ties
  }
  candidates.push_back(list_schedule(p, Policy::net_first));
  candidates.push_back(list_schedule(p, Policy::depth_first));
  size_t best = 0;
  int64_t best_peak = peak_live_bytes(kernels, buffers, candidates[0]);
  for (size_t i = 1; i < candidates.size(); ++i) {
    const int64_t peak = peak_live_bytes(kernels, buffers, candidates[i]);
    if (peak < best_peak) best = i, best_peak = peak;
  }
  return std::move(candidates[best]);
}

int64_t peak_live_bytes(const std::vector<KernelNode>& kernels, const std::vector<ScheduledBuffer>& buffers,
                        const std::vector<int>& order) {
  const int n = static_cast<int>(kernels.size());
  if (static_cast<int>(order.size()) != n) throw Error("kernel order: the order does not list every kernel once");
  std::vector<int> pos(n, -1);
  for (int i = 0; i < n; ++i) {
    check_kernel(order[i], n, "the order");
    if (pos[order[i]] != -1) throw Error("kernel order: kernel " + std::to_string(order[i]) + " appears twice");
    pos[order[i]] = i;
  }
  std::vector<int64_t> delta(n + 1, 0);  // +size where a buffer starts, -size after it ends
  for (size_t b = 0; b < buffers.size(); ++b) {
    const ScheduledBuffer& buf = buffers[b];
    if (buf.producer == -1) continue;
    check_kernel(buf.producer, n, "the producer of buffer " + std::to_string(b));
    const int start = pos[buf.producer];
    int end = start;
    for (int c : buf.consumers) {
      check_kernel(c, n, "a consumer of buffer " + std::to_string(b));
      end = std::max(end, pos[c]);
    }
    delta[start] += buf.size;
    delta[end + 1] -= buf.size;
  }
  int64_t live = 0, peak = 0;
  for (int i = 0; i < n; ++i) {
    live += delta[i];
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace tj
