// fold_norm_weights: when rms_norm(x, w) or layer_norm(x, w, b) feeds only
// matmuls whose right-hand side W [D, N] is a param or constant, the scale is
// folded into the weights, W' = diag(w)·W, and the norm keeps a scale of ones:
//   rms_norm(x, w) @ W        -> rms_norm(x, 1) @ (w[:,None] * W)
//   layer_norm(x, w, b) @ W   -> layer_norm(x, 1, 0) @ (w[:,None] * W) + b @ W
// W' (and b @ W) depend on weights only: with freezing, constant_fold computes
// them at compile time. Reassociates one product per weight: about 1 ulp.
#include "ir/rewriter.h"
#include "passes/passes.h"

namespace tj {

namespace {

bool is_weight(const Graph& g, ValueId v) {
  Op op = g.node(v).op;
  return op == Op::param || op == Op::constant;
}

// All users are matmuls taking the norm on the left and a [D, N] weight on the right.
bool foldable(const Graph& g, const std::vector<std::vector<ValueId>>& users, ValueId v) {
  const Node& n = g.node(v);
  if (n.op != Op::rms_norm && n.op != Op::layer_norm) return false;
  if (!is_weight(g, n.inputs[1])) return false;
  if (n.op == Op::layer_norm && !is_weight(g, n.inputs[2])) return false;
  if (is_splat(g, n.inputs[1], 1.0)) return false;  // already folded
  const auto& us = users[static_cast<size_t>(v)];
  if (us.empty()) return false;
  for (ValueId u : us) {
    if (u < 0) return false;  // a graph output
    const Node& m = g.node(u);
    if (m.op != Op::matmul || m.inputs[0] != v || m.inputs[1] == v) return false;
    if (!is_weight(g, m.inputs[1]) || g.type(m.inputs[1]).rank() != 2) return false;
  }
  return true;
}

}  // namespace

bool fold_norm_weights(Graph& g, const PassOptions&) {
  auto users = users_of(g);
  std::vector<bool> fold(g.size(), false);
  bool any = false;
  for (size_t i = 0; i < g.size(); ++i) any |= fold[i] = foldable(g, users, static_cast<ValueId>(i));
  if (!any) return false;

  Rewriter rw(g);
  Graph& out = rw.out();
  g = rw.run([&](ValueId v) -> ValueId {
    const Node& n = g.node(v);
    if (fold[static_cast<size_t>(v)]) {
      const Type& wt = g.type(n.inputs[1]);
      std::vector<ValueId> ins = {rw.map(n.inputs[0]), out.add_const(wt, std::vector<double>{1.0})};
      if (n.op == Op::layer_norm) ins.push_back(out.add_const(wt, std::vector<double>{0.0}));
      return out.add_raw(n.op, ins, n.attrs);
    }
    if (n.op == Op::matmul && fold[static_cast<size_t>(n.inputs[0])]) {
      const Node& norm = g.node(n.inputs[0]);
      ValueId w = rw.map(norm.inputs[1]);
      ValueId W = rw.map(n.inputs[1]);
      Dim D = g.type(norm.inputs[1]).shape[0];
      ValueId scaled = out.add(Op::mul, {out.add(Op::reshape, {w}, {{"shape", Shape{D, 1}}}), W});
      ValueId y = out.add(Op::matmul, {rw.map(n.inputs[0]), scaled});
      if (norm.op == Op::layer_norm) {
        ValueId b = out.add(Op::reshape, {rw.map(norm.inputs[2])}, {{"shape", Shape{1, D}}});
        y = out.add(Op::add, {y, out.add(Op::matmul, {b, W})});
      }
      return y;
    }
    return Rewriter::kCopy;
  });
  return true;
}

}  // namespace tj
