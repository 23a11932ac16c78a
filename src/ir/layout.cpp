// The packed weight views of pack_conv_weights (ir/layout.h).
#include "ir/layout.h"

#include <algorithm>

namespace tj {

namespace {

// The stored value behind slice?(reshape(permute(c, perm))) with c's last
// dim `lanes`, perm as `perm_of` gives for c's rank, or -1. Stored: a param,
// a constant, or a product computed per call (fold_input_scale's scaled
// copy of packed weights, mul(Wq, s)), which a kernel writes whole.
template <class PermOf>
ValueId packed_view(const Graph& g, ValueId w, int64_t lanes, PermOf perm_of) {
  const Node* n = &g.node(w);
  if (n->op == Op::slice) {
    if (n->attr_int("axis") != 0 || n->attr_dim("start") != Dim(0) || n->attr_int("step") != 1) return -1;
    n = &g.node(n->inputs[0]);
  }
  if (n->op != Op::reshape) return -1;
  const Node& p = g.node(n->inputs[0]);
  if (p.op != Op::permute) return -1;
  const ValueId c = p.inputs[0];
  const Node& cn = g.node(c);
  const int64_t r = cn.type.rank();
  const bool stored = cn.op == Op::param || cn.op == Op::mul || (cn.op == Op::constant && cn.const_data()->size() > 1);
  if (!stored || cn.type.dtype != DType::f32 || cn.type.shape.back() != Dim(lanes)) return -1;
  return p.attr_ints("perm") == perm_of(r) ? c : -1;
}

}  // namespace

std::vector<int64_t> blocks_order(int64_t r) {
  std::vector<int64_t> o;
  for (int64_t d = 1; d < r; ++d) o.push_back(d);
  return o;
}

std::vector<int64_t> quads_order(int64_t r) {
  std::vector<int64_t> o;
  for (int64_t d = 2; d < r; ++d) o.push_back(d);
  o.push_back(1);
  return o;
}

std::vector<int64_t> packed_view_perm(const std::vector<int64_t>& order) {
  const int64_t r = static_cast<int64_t>(order.size()) + 1;  // w's rank
  std::vector<int64_t> perm{0, r};
  for (int64_t d = 1; d < r; ++d) perm.push_back(1 + (std::find(order.begin(), order.end(), d) - order.begin()));
  return perm;
}

ValueId packed_conv_blocks(const Graph& g, ValueId w) {
  return packed_view(g, w, 16, [](int64_t r) { return packed_view_perm(blocks_order(r - 1)); });
}

ValueId packed_conv_quads(const Graph& g, ValueId w, int64_t lanes) {
  return packed_view(g, w, lanes, [](int64_t r) { return packed_view_perm(quads_order(r - 1)); });
}

int64_t conv_quad_lanes(const Shape& w, int64_t groups) {
  if (groups == 1) return 64;
  if (groups < 1 || w.size() < 3 || !w[0].is_const() || w[0].value() % groups != 0) return 0;
  const int64_t mg = w[0].value() / groups, lanes = std::min<int64_t>(mg, 64);
  return mg % 16 == 0 && mg % lanes == 0 ? lanes : 0;
}

bool taps_first_conv(const Shape& w, int64_t groups) {
  const bool depthwise = w.size() >= 3 && w[0] == Dim(groups) && w[1] == Dim(1);
  return depthwise || grouped_channels_last(w, groups);
}

bool grouped_channels_last(const Shape& w, int64_t groups) {
  if (groups <= 1 || w.size() < 3 || !w[0].is_const() || !w[1].is_const()) return false;
  const int64_t cg = w[1].value();
  return w[0].value() == groups * cg && cg >= 2 && conv_quad_lanes(w, groups) == 0;
}

bool grouped_by_library(const Shape& w, int64_t groups, int64_t vector_floats) {
  return grouped_channels_last(w, groups) && vector_floats % w[1].value() != 0;
}

ValueId packed_conv_taps(const Graph& g, ValueId w) {
  const Node& r = g.node(w);
  if (r.op != Op::reshape) return -1;
  const Node& p = g.node(r.inputs[0]);
  if (p.op != Op::permute) return -1;
  const Node& c = g.node(p.inputs[0]);
  const bool stored = c.op == Op::param || (c.op == Op::constant && c.const_data()->size() > 1);
  const auto& perm = p.attr_ints("perm");
  const bool form = (c.type.rank() == 2 && perm == std::vector<int64_t>{1, 0}) || (c.type.rank() == 3 && perm == std::vector<int64_t>{2, 1, 0});
  return stored && form && c.type.dtype == DType::f32 ? p.inputs[0] : -1;
}

}  // namespace tj
