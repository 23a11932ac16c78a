// The packed weight views of pack_conv_weights (ir/layout.h).
#include "ir/layout.h"

namespace tj {

ValueId packed_conv_blocks(const Graph& g, ValueId w) {
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
  const bool stored = cn.op == Op::param || (cn.op == Op::constant && cn.const_data()->size() > 1);
  if (!stored || cn.type.dtype != DType::f32 || cn.type.shape.back() != Dim(16)) return -1;
  std::vector<int64_t> perm{0, r - 1};
  for (int64_t i = 1; i + 1 < r; ++i) perm.push_back(i);
  return p.attr_ints("perm") == perm ? c : -1;
}

ValueId packed_conv_taps(const Graph& g, ValueId w) {
  const Node& r = g.node(w);
  if (r.op != Op::reshape) return -1;
  const Node& p = g.node(r.inputs[0]);
  if (p.op != Op::permute || p.attr_ints("perm") != std::vector<int64_t>{1, 0}) return -1;
  const Node& c = g.node(p.inputs[0]);
  const bool stored = c.op == Op::param || (c.op == Op::constant && c.const_data()->size() > 1);
  return stored && c.type.dtype == DType::f32 && c.type.rank() == 2 ? p.inputs[0] : -1;
}

}  // namespace tj
