// What a schedule's kernels read, in what order they must run, and which
// buffers a kernel may overwrite (schedule/fusion.h): the questions the
// memory planner and donations ask of a fused schedule.
#include <algorithm>

#include "schedule/fusion.h"

namespace tj {

bool sums_in_epilogue(const Graph& g, const Kernel& K, ValueId v) { return K.kind == KernelKind::conv && g.node(v).def().fuse == Fuse::reduction; }

ValueId summed_value(const Graph& g, ValueId sum) {
  ValueId x = g.node(sum).inputs[0];
  while (g.node(x).op == Op::reshape) x = g.node(x).inputs[0];
  return x;
}

bool overwrites_safely(const Graph& g, const Kernel& K, ValueId v, ValueId b) {
  size_t first = 0;
  if (K.kind == KernelKind::matmul || K.kind == KernelKind::conv) {  // the product's operands must not be b
    for (ValueId o : g.node(K.ops[0]).inputs)
      if (base_buffer(g, o) == b) return false;
    first = 1;
  } else if (K.kind != KernelKind::pointwise) {
    return false;
  }
  // Stores split the kernel's loop in segments: b may be read in v's segment
  // (where it is written) or before, never after.
  int segment = 0, v_segment = -1;
  std::vector<int> read_in;
  for (size_t i = first; i < K.ops.size(); ++i) {
    const Node& n = g.node(K.ops[i]);
    const bool store = n.def().fuse == Fuse::store;
    if (K.ops[i] != v && sums_in_epilogue(g, K, K.ops[i])) continue;  // reads only K's own values
    if (K.ops[i] == v) {
      if (store) return false;
      v_segment = segment;
    }
    if (!store && n.type.shape != K.space) return false;
    for (ValueId o : n.inputs) {
      if (base_buffer(g, o) != b) continue;
      if (store || n.def().fuse == Fuse::gather) return false;  // reads at other indices than it writes
      if (g.type(o).shape != K.space) return false;
      for (ValueId x = o; x != b; x = g.node(x).inputs[0]) {
        Op op = g.node(x).op;
        if (op != Op::reshape && op != Op::squeeze && op != Op::unsqueeze) return false;
      }
      read_in.push_back(segment);
    }
    if (store) ++segment;
  }
  for (int r : read_in)
    if (r > v_segment) return false;
  return v_segment >= 0;
}

std::vector<std::vector<int>> kernel_dependencies(const Graph& g, const Schedule& s) {
  std::vector<std::vector<int>> deps(s.kernels.size());
  std::vector<std::vector<int>> readers(g.size());
  for (size_t k = 0; k < s.kernels.size(); ++k)
    for (ValueId in : s.kernels[k].inputs) {
      readers[static_cast<size_t>(in)].push_back(static_cast<int>(k));
      if (int p = s.kernel_of[static_cast<size_t>(in)]; p >= 0 && p != static_cast<int>(k)) deps[k].push_back(p);
    }
  for (size_t k = 0; k < s.kernels.size(); ++k)
    for (ValueId v : s.kernels[k].outputs)
      if (ValueId b = s.in_place[static_cast<size_t>(v)]; b >= 0)
        for (int r : readers[static_cast<size_t>(b)])
          if (r != static_cast<int>(k)) deps[k].push_back(r);
  for (auto& d : deps) {
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
  }
  return deps;
}

}  // namespace tj
