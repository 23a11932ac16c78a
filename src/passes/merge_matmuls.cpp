// merge_matmuls: matmuls that multiply the same left operand by constant
// weights become one matmul by the weights side by side, and each result a
// slice of it:
//   q = x @ Wq, k = x @ Wk, v = x @ Wv  ->  y = x @ [Wq|Wk|Wv], q = y[..., 0:nq], ...
// (the "concat linear" of inference compilers). One product streams x once
// and gives the code generator one larger GEMM or GEMV instead of several
// small ones, each with its own call and fork/join: a transformer layer's
// Q/K/V projections, and its gate and up projections.
// Assumes nothing; applies to 2-D constant weights of one dtype with the
// same row count (frozen weights: run after freeze and constant_fold).
// Guarantees a bit-identical result in the interpreter, which computes each
// output element as the same dot product either way.
#include <cstring>
#include <map>
#include <tuple>

#include "ir/rewriter.h"
#include "passes/passes.h"

namespace tj {

namespace {

// [K, N1 + N2 + ...]: each row the rows of the parts, side by side.
ConstData side_by_side(const Graph& g, const std::vector<ValueId>& parts) {
  const Type& t0 = g.type(parts[0]);
  int64_t K = t0.shape[0].value(), N = 0;
  for (ValueId w : parts) N += g.type(w).shape[1].value();
  NDArray out(t0.dtype, {K, N});
  const size_t elem = static_cast<size_t>(dtype_size(t0.dtype));
  char* dst = static_cast<char*>(out.raw());
  int64_t col = 0;
  for (ValueId w : parts) {
    const int64_t n = g.type(w).shape[1].value();
    const char* src = static_cast<const char*>(g.node(w).const_data()->raw());
    for (int64_t r = 0; r < K; ++r)
      std::memcpy(dst + static_cast<size_t>(r * N + col) * elem, src + static_cast<size_t>(r * n) * elem, static_cast<size_t>(n) * elem);
    col += n;
  }
  return ConstValues::adopt(std::move(out));
}

}  // namespace

bool merge_matmuls(Graph& g, const PassOptions&) {
  // Groups by left operand, weight dtype and row count, in program order.
  std::map<std::tuple<ValueId, DType, int64_t>, std::vector<ValueId>> groups;
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op != Op::matmul || !is_weight_matrix(g, n.inputs[1]) || n.inputs[0] == n.inputs[1]) continue;
    const Type& w = g.type(n.inputs[1]);
    groups[{n.inputs[0], w.dtype, w.shape[0].value()}].push_back(static_cast<ValueId>(i));
  }
  std::vector<int> group_of(g.size(), -1);
  std::vector<std::vector<ValueId>> merged;
  for (auto& [key, ms] : groups) {
    if (ms.size() < 2) continue;
    for (ValueId m : ms) group_of[static_cast<size_t>(m)] = static_cast<int>(merged.size());
    merged.push_back(ms);
  }
  if (merged.empty()) return false;

  Rewriter rw(g);
  Graph& out = rw.out();
  g = rw.run([&](ValueId v) -> ValueId {
    int k = group_of[static_cast<size_t>(v)];
    if (k < 0) return Rewriter::kCopy;
    const auto& ms = merged[static_cast<size_t>(k)];
    if (v != ms[0]) return rw.map(v);  // set when the first of the group was visited
    std::vector<ValueId> weights;
    for (ValueId m : ms) weights.push_back(g.node(m).inputs[1]);
    const Type& t0 = g.type(weights[0]);
    Dim N = 0;
    for (ValueId w : weights) N = N + g.type(w).shape[1];
    ValueId W = out.add_const(Type{t0.dtype, {t0.shape[0], N}}, side_by_side(g, weights));
    ValueId y = out.add(Op::matmul, {rw.map(g.node(v).inputs[0]), W});
    int64_t axis = g.type(v).rank() - 1;
    Dim at = 0;
    for (ValueId m : ms) {
      Dim n = g.type(g.node(m).inputs[1]).shape[1];
      rw.set(m, out.add(Op::slice, {y}, {{"axis", axis}, {"start", at}, {"end", at + n}}));
      at = at + n;
    }
    return rw.map(v);
  });
  return true;
}

}  // namespace tj
