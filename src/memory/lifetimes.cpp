#include "memory/lifetimes.h"

#include <algorithm>
#include <numeric>

#include "memory/reorder.h"

namespace tj {

namespace {

int64_t value_bytes(const Graph& g, ValueId v) {
  const Type& t = g.type(v);
  return numel_const(t.shape).value() * dtype_size(t.dtype);
}

// For each kernel output: the kernels that read it (directly or via views).
std::vector<std::vector<int>> readers(const Graph& g, const Schedule& s) {
  std::vector<std::vector<int>> r(g.size());
  for (size_t k = 0; k < s.kernels.size(); ++k)
    for (ValueId b : s.kernels[k].inputs) r[static_cast<size_t>(b)].push_back(static_cast<int>(k));
  return r;
}

int find(std::vector<int>& parent, int x) {
  while (parent[static_cast<size_t>(x)] != x) x = parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
  return x;
}

}  // namespace

ActivationPlan plan_activations(const Graph& g, const Schedule& s, bool in_place) {
  ActivationPlan p;
  auto rd = readers(g, s);
  std::vector<bool> is_output(g.size(), false);
  for (ValueId o : g.outputs())
    if (ValueId b = base_buffer(g, o); b >= 0) is_output[static_cast<size_t>(b)] = true;
  const int end = static_cast<int>(s.kernels.size()) - 1;

  std::vector<int> index_of(g.size(), -1);
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    for (ValueId v : s.kernels[k].outputs) {
      if (s.writes_in_place(v)) continue;  // lives in its cache
      int last = static_cast<int>(k);
      for (int r : rd[static_cast<size_t>(v)]) last = std::max(last, r);
      if (is_output[static_cast<size_t>(v)]) last = end;
      index_of[static_cast<size_t>(v)] = static_cast<int>(p.buffers.size());
      p.buffers.push_back({v, value_bytes(g, v), static_cast<int>(k), last, -1});
    }
  }

  // In-place reuse: union the output with a same-size input that dies here.
  std::vector<int> parent(p.buffers.size());
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<bool> taken(p.buffers.size(), false);
  if (in_place) {
    for (size_t k = 0; k < s.kernels.size(); ++k) {
      const Kernel& K = s.kernels[k];
      if (K.kind != KernelKind::pointwise) continue;
      for (ValueId v : K.outputs) {
        int bv = index_of[static_cast<size_t>(v)];
        if (bv < 0) continue;
        for (ValueId in : K.inputs) {
          int bi = index_of[static_cast<size_t>(in)];
          if (bi < 0 || in == v || taken[static_cast<size_t>(bi)] || is_output[static_cast<size_t>(in)]) continue;
          if (!overwrites_safely(g, K, v, in)) continue;
          const PlannedBuffer& b = p.buffers[static_cast<size_t>(bi)];
          // The group's last reader must be this kernel (whole group, after earlier merges).
          int root = find(parent, bi);
          int group_last = 0;
          for (size_t j = 0; j < p.buffers.size(); ++j)
            if (find(parent, static_cast<int>(j)) == root) group_last = std::max(group_last, p.buffers[j].last);
          if (b.size != p.buffers[static_cast<size_t>(bv)].size || group_last != static_cast<int>(k)) continue;
          parent[static_cast<size_t>(find(parent, bv))] = root;
          taken[static_cast<size_t>(bi)] = true;
          ++p.in_place;
          break;
        }
      }
    }
  }

  std::vector<int> slot_of_root(p.buffers.size(), -1);
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    int root = find(parent, static_cast<int>(i));
    int& slot = slot_of_root[static_cast<size_t>(root)];
    if (slot < 0) {
      slot = static_cast<int>(p.slots.size());
      p.slots.push_back({p.buffers[i].size, p.buffers[i].first, p.buffers[i].last});
    }
    BufferReq& r = p.slots[static_cast<size_t>(slot)];
    r.size = std::max(r.size, p.buffers[i].size);
    r.first = std::min(r.first, p.buffers[i].first);
    r.last = std::max(r.last, p.buffers[i].last);
    p.buffers[i].slot = slot;
  }
  p.plan = plan_greedy_by_size(p.slots);
  return p;
}

Schedule reorder_schedule(const Graph& g, const Schedule& s) {
  std::vector<KernelNode> nodes(s.kernels.size());
  std::vector<ScheduledBuffer> bufs;
  auto rd = readers(g, s);
  auto deps = kernel_dependencies(g, s);
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    nodes[k].deps = std::move(deps[k]);
    for (ValueId v : s.kernels[k].outputs) {
      if (s.writes_in_place(v)) continue;
      ScheduledBuffer b{value_bytes(g, v), static_cast<int>(k), {}};
      for (int r : rd[static_cast<size_t>(v)])
        if (r != static_cast<int>(k)) b.consumers.push_back(r);
      bufs.push_back(std::move(b));
    }
  }
  // kv_write results alias their cache: readers of the cache (flash_attn) come
  // after the write through the data dependency already recorded above. A
  // donated input's other readers come before the kernel that overwrites it.
  std::vector<int> order = reorder_for_memory(nodes, bufs);
  Schedule r;
  r.kernel_of.assign(s.kernel_of.size(), -1);
  r.in_place = s.in_place;
  for (int k : order) {
    for (ValueId v : s.kernels[static_cast<size_t>(k)].ops) r.kernel_of[static_cast<size_t>(v)] = static_cast<int>(r.kernels.size());
    r.kernels.push_back(s.kernels[static_cast<size_t>(k)]);
  }
  return r;
}

}  // namespace tj
