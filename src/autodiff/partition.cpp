#include "autodiff/partition.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <set>

#include "passes/passes.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;

// Maximum flow (Dinic), then the source side of a minimum cut.
class FlowNetwork {
 public:
  explicit FlowNetwork(int n) : head_(static_cast<size_t>(n), -1) {}
  void edge(int from, int to, int64_t cap) {
    edges_.push_back({to, head_[static_cast<size_t>(from)], cap});
    head_[static_cast<size_t>(from)] = static_cast<int>(edges_.size()) - 1;
    edges_.push_back({from, head_[static_cast<size_t>(to)], 0});
    head_[static_cast<size_t>(to)] = static_cast<int>(edges_.size()) - 1;
  }
  int64_t max_flow(int s, int t) {
    int64_t total = 0;
    while (levels(s, t)) {
      next_ = head_;
      while (int64_t f = push(s, t, kInf)) total += f;
    }
    return total;
  }
  // After max_flow: the nodes reachable from s in the residual network.
  std::vector<bool> source_side(int s) const {
    std::vector<bool> seen(head_.size(), false);
    std::queue<int> q;
    q.push(s), seen[static_cast<size_t>(s)] = true;
    while (!q.empty()) {
      int u = q.front();
      q.pop();
      for (int e = head_[static_cast<size_t>(u)]; e >= 0; e = edges_[static_cast<size_t>(e)].next) {
        const Edge& x = edges_[static_cast<size_t>(e)];
        if (x.cap > 0 && !seen[static_cast<size_t>(x.to)]) seen[static_cast<size_t>(x.to)] = true, q.push(x.to);
      }
    }
    return seen;
  }

 private:
  struct Edge {
    int to, next;
    int64_t cap;
  };
  bool levels(int s, int t) {
    level_.assign(head_.size(), -1);
    std::queue<int> q;
    q.push(s), level_[static_cast<size_t>(s)] = 0;
    while (!q.empty()) {
      int u = q.front();
      q.pop();
      for (int e = head_[static_cast<size_t>(u)]; e >= 0; e = edges_[static_cast<size_t>(e)].next) {
        const Edge& x = edges_[static_cast<size_t>(e)];
        if (x.cap > 0 && level_[static_cast<size_t>(x.to)] < 0) level_[static_cast<size_t>(x.to)] = level_[static_cast<size_t>(u)] + 1, q.push(x.to);
      }
    }
    return level_[static_cast<size_t>(t)] >= 0;
  }
  // One augmenting path (iterative, so that long graphs keep a small stack).
  int64_t push(int s, int t, int64_t limit) {
    std::vector<int> path;  // edges
    int u = s;
    while (true) {
      if (u == t) {
        int64_t f = limit;
        for (int e : path) f = std::min(f, edges_[static_cast<size_t>(e)].cap);
        for (int e : path) edges_[static_cast<size_t>(e)].cap -= f, edges_[static_cast<size_t>(e ^ 1)].cap += f;
        return f;
      }
      int& e = next_[static_cast<size_t>(u)];
      while (e >= 0) {
        const Edge& x = edges_[static_cast<size_t>(e)];
        if (x.cap > 0 && level_[static_cast<size_t>(x.to)] == level_[static_cast<size_t>(u)] + 1) break;
        e = x.next;
      }
      if (e >= 0) {
        path.push_back(e);
        u = edges_[static_cast<size_t>(e)].to;
      } else {  // a dead end: back up, and never try it again this phase
        level_[static_cast<size_t>(u)] = -1;
        if (path.empty()) return 0;
        int back = path.back();
        path.pop_back();
        u = edges_[static_cast<size_t>(back ^ 1)].to;
        next_[static_cast<size_t>(u)] = edges_[static_cast<size_t>(next_[static_cast<size_t>(u)])].next;
      }
    }
  }
  std::vector<Edge> edges_;
  std::vector<int> head_, next_, level_;
};

bool is_free(const Node& n) { return n.op == Op::input || n.op == Op::param || n.op == Op::constant; }

// Ops the backward never computes again: they stay in the forward, saved
// if the backward needs them (as AOTAutograd bans recomputing products and
// reductions). Elementwise ops, pointwise composites, views and
// generators may be recomputed.
bool never_recomputed(const Node& n) {
  switch (n.def().fuse) {
    case Fuse::pointwise:
    case Fuse::view:
    case Fuse::generator: return false;
    default: return true;
  }
}

int64_t bytes_of(const Type& t, const SymEnv& hint) {
  return numel(t.shape).eval(hint) * static_cast<int64_t>(dtype_size(t.dtype));
}

// The nodes of `j` that `roots` need, as a graph: `leaf(v)` values are
// brought in by `bring` (inputs, params and constants always are).
Graph slice(const Graph& j, const std::string& name, const std::vector<ValueId>& roots, const std::function<bool(ValueId)>& leaf,
            const std::function<ValueId(Graph&, ValueId)>& bring, std::vector<bool>* needed_out = nullptr) {
  std::vector<bool> needed(j.size(), false);
  std::vector<ValueId> stack(roots.begin(), roots.end());
  while (!stack.empty()) {
    ValueId v = stack.back();
    stack.pop_back();
    if (needed[static_cast<size_t>(v)]) continue;
    needed[static_cast<size_t>(v)] = true;
    if (leaf(v) || is_free(j.node(v))) continue;
    for (ValueId i : j.node(v).inputs) stack.push_back(i);
  }
  Graph s(name);
  std::vector<ValueId> map(j.size(), -1);
  for (size_t v = 0; v < j.size(); ++v) {
    if (!needed[v]) continue;
    const ValueId id = static_cast<ValueId>(v);
    const Node& n = j.node(id);
    if (leaf(id) || is_free(n)) {
      map[v] = bring(s, id);
    } else {
      std::vector<ValueId> ins;
      for (ValueId i : n.inputs) ins.push_back(map[static_cast<size_t>(i)]);
      map[v] = s.add_raw(n.op, ins, n.attrs);
    }
  }
  std::vector<ValueId> outs;
  for (ValueId r : roots) outs.push_back(map[static_cast<size_t>(r)]);
  s.set_outputs(outs);
  if (needed_out) *needed_out = std::move(needed);
  return s;
}

}  // namespace

Partition partition(const Graph& g, const Vjp& v, const SymEnv& size_hint_in) {
  if (v.cotangents.empty()) throw Error("partition: the joint graph needs cotangent inputs (VjpSpec::seed_ones = false)");
  // Composites decomposed, so that the cut can fall inside them (RMSNorm's
  // row statistic saved, its rows recomputed), and the backward's
  // recomputations of forward values merged with them.
  Graph j = v.joint;
  PassOptions po;
  decompose(j, po);
  cse(j, po);
  dce(j, po);
  const size_t n = j.size();
  const SymEnv hint = size_hint(j, size_hint_in);
  const std::vector<ValueId> fwd_outs(j.outputs().begin(), j.outputs().begin() + static_cast<std::ptrdiff_t>(v.forward_outputs));

  // Values that depend on a cotangent: the backward's own.
  std::vector<bool> tangent(n, false);
  for (const std::string& c : v.cotangents) tangent[static_cast<size_t>(j.find(c))] = true;
  for (size_t i = 0; i < n; ++i) {
    const Node& node = j.node(static_cast<ValueId>(i));
    for (ValueId x : node.inputs) tangent[i] = tangent[i] || tangent[static_cast<size_t>(x)];
  }
  const std::vector<ValueId> grads(j.outputs().begin() + static_cast<std::ptrdiff_t>(v.forward_outputs), j.outputs().end());

  // The network: per primal value an in and an out node; saving it cuts the
  // edge between them (its bytes).
  const int S = static_cast<int>(2 * n), T = S + 1;
  FlowNetwork net(T + 1);
  auto in = [](size_t i) { return static_cast<int>(2 * i); };
  auto out = [](size_t i) { return static_cast<int>(2 * i + 1); };
  std::vector<bool> needed_back(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (!tangent[i]) continue;
    for (ValueId x : j.node(static_cast<ValueId>(i)).inputs)
      if (!tangent[static_cast<size_t>(x)]) needed_back[static_cast<size_t>(x)] = true;
  }
  for (ValueId gv : grads)
    if (!tangent[static_cast<size_t>(gv)]) needed_back[static_cast<size_t>(gv)] = true;
  for (size_t i = 0; i < n; ++i) {
    if (tangent[i]) continue;
    const Node& node = j.node(static_cast<ValueId>(i));
    const bool free = is_free(node);
    if (free || never_recomputed(node)) net.edge(S, in(i), kInf);
    net.edge(in(i), out(i), free ? 0 : bytes_of(node.type, hint));
    for (ValueId x : node.inputs) net.edge(out(static_cast<size_t>(x)), in(i), kInf);
    if (needed_back[i]) net.edge(out(i), T, kInf);
  }
  for (ValueId o : fwd_outs) net.edge(S, in(static_cast<size_t>(o)), kInf);  // the forward computes its outputs
  net.max_flow(S, T);
  const std::vector<bool> reach = net.source_side(S);

  Partition p;
  for (const Node& node : g.nodes())  // the graph as written, composites whole
    if (!is_free(node)) p.every_forward_value_bytes += bytes_of(node.type, size_hint(g, size_hint_in));
  std::vector<int> saved_index(n, -1);
  std::vector<ValueId> saved_values;
  for (size_t i = 0; i < n; ++i) {
    if (tangent[i] || is_free(j.node(static_cast<ValueId>(i)))) continue;
    if (reach[static_cast<size_t>(in(i))] && !reach[static_cast<size_t>(out(i))]) {
      saved_index[i] = static_cast<int>(p.saved.size());
      const Node& node = j.node(static_cast<ValueId>(i));
      p.saved.push_back({"saved." + std::to_string(p.saved.size()), node.type, node.def().name, bytes_of(node.type, hint)});
      saved_values.push_back(static_cast<ValueId>(i));
      p.saved_bytes += p.saved.back().bytes;
    }
  }

  // The forward: g's outputs and the saved values, from g's inputs.
  std::vector<ValueId> fwd_roots = fwd_outs;
  fwd_roots.insert(fwd_roots.end(), saved_values.begin(), saved_values.end());
  auto copy_leaf = [&](Graph& s, ValueId x) {
    const Node& node = j.node(x);
    if (node.op == Op::input) return s.add_input(node.name, node.type);
    if (node.op == Op::param) return s.add_param(node.name, node.type);
    return s.copy_const(node);
  };
  p.forward = slice(j, g.name() + "_forward", fwd_roots, [](ValueId) { return false; }, copy_leaf);

  // The backward: the gradients, from the saved values, the cotangents and
  // the inputs and params it reads; primal values past the cut are computed
  // again.
  std::set<std::string> reused;
  std::vector<bool> in_backward;
  p.backward = slice(j, g.name() + "_backward", grads, [&](ValueId x) { return saved_index[static_cast<size_t>(x)] >= 0; },
                     [&](Graph& s, ValueId x) {
                       int k = saved_index[static_cast<size_t>(x)];
                       if (k >= 0) return s.add_input(p.saved[static_cast<size_t>(k)].name, j.type(x));
                       const Node& node = j.node(x);
                       if (node.op == Op::constant) return s.copy_const(node);
                       if (!tangent[static_cast<size_t>(x)]) reused.insert(node.name);
                       return s.add_input(node.name, node.type);  // params too: the backward is given them
                     },
                     &in_backward);
  p.reused.assign(reused.begin(), reused.end());
  for (size_t i = 0; i < n; ++i)
    if (in_backward[i] && !tangent[i] && !is_free(j.node(static_cast<ValueId>(i))) && saved_index[i] < 0) ++p.recomputed;
  return p;
}

}  // namespace tj
