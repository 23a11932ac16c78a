// fold_conv_affine: a per-channel affine map after a convolution moves into
// its weights and bias (inference batch-norm, a scale, a shift):
//   conv(x, w, b) op1 p1 op2 p2 ...  ->  conv(x, w * a[:, None..], b * a + c)
// where each op is mul, div, add or sub (the conv's value on the left; on
// either side for mul and add) by a value that depends on weights alone
// (params and constants) and varies at most over the channel dim, and
// y -> y * a + c is their composition. Each value of the chain but the last
// must have no other user and not be an output. With freezing,
// constant_fold then computes the new weights at compile time. Reassociates
// (x * w) * a as x * (w * a): about 1 ulp.
#include <optional>

#include "ir/rewriter.h"
#include "passes/passes.h"

namespace tj {

namespace {

class Folder {
 public:
  explicit Folder(const Graph& g) : g_(g), users_(users_of(g)), weight_(g.size(), -1) {}

  // Computed from params and constants alone.
  bool weight_only(ValueId v) {
    int8_t& w = weight_[static_cast<size_t>(v)];
    if (w >= 0) return w;
    const Node& n = g_.node(v);
    bool r = n.op == Op::param || n.op == Op::constant;
    if (n.op != Op::input && !r && !n.inputs.empty() && n.def().category != OpCategory::control) {
      r = true;
      for (ValueId i : n.inputs) r = r && weight_only(i);
    }
    w = r;
    return r;
  }

  // p broadcasts against y [N, M, d..] over the channel dim alone.
  bool per_channel(ValueId p, const Shape& y) const {
    const Shape& s = g_.type(p).shape;
    if (s.size() > y.size()) return false;
    const size_t off = y.size() - s.size();
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] != Dim(1) && !(i + off == 1 && s[i] == y[1])) return false;
    return true;
  }

  ValueId sole_user(ValueId v) const {
    const auto& us = users_[static_cast<size_t>(v)];
    if (us.size() != 1 || us[0] < 0) return -1;
    return us[0];
  }

  struct Step {
    Op op;
    ValueId p;
  };
  // The chain after conv `v`: its steps, and its last value.
  std::optional<std::pair<std::vector<Step>, ValueId>> chain(ValueId v) {
    const Node& c = g_.node(v);
    // (A winograd conv's u is derived from its weights: left alone.)
    if (c.op != Op::conv || c.attr_bool("winograd") || !weight_only(c.inputs[1]) || (c.inputs.size() > 2 && !weight_only(c.inputs[2]))) return std::nullopt;
    std::vector<Step> steps;
    ValueId at = v;
    for (ValueId u = sole_user(at); u >= 0; u = sole_user(at)) {
      const Node& n = g_.node(u);
      if (n.type != g_.type(at)) break;
      ValueId p = -1;
      if ((n.op == Op::mul || n.op == Op::add) && n.inputs.size() == 2) p = n.inputs[0] == at ? n.inputs[1] : n.inputs[0];
      else if ((n.op == Op::div || n.op == Op::sub) && n.inputs[0] == at) p = n.inputs[1];
      if (p < 0 || p == at || !weight_only(p) || !per_channel(p, n.type.shape)) break;
      steps.push_back({n.op, p});
      at = u;
    }
    if (steps.empty()) return std::nullopt;
    return std::make_pair(steps, at);
  }

 private:
  const Graph& g_;
  std::vector<std::vector<ValueId>> users_;
  std::vector<int8_t> weight_;
};

}  // namespace

bool fold_conv_affine(Graph& g, const PassOptions&) {
  Folder f(g);
  std::vector<std::optional<std::pair<std::vector<Folder::Step>, ValueId>>> chains(g.size());
  std::vector<ValueId> conv_of(g.size(), -1);  // per chain end: its conv
  bool any = false;
  for (size_t v = 0; v < g.size(); ++v)
    if (auto c = f.chain(static_cast<ValueId>(v))) {
      conv_of[static_cast<size_t>(c->second)] = static_cast<ValueId>(v);
      chains[v] = std::move(c);
      any = true;
    }
  if (!any) return false;

  Rewriter rw(g);
  Graph& out = rw.out();
  g = rw.run([&](ValueId v) -> ValueId {
    const ValueId cv = conv_of[static_cast<size_t>(v)];
    if (cv < 0) return Rewriter::kCopy;
    const Node& c = g.node(cv);
    const Type& yt = c.type;
    const Dim M = yt.shape[1];
    auto vec = [&](ValueId p) {  // p as [M]
      ValueId r = out.add(Op::reshape, {rw.map(p)}, {{"shape", Shape{numel(g.type(p).shape)}}});
      return out.type(r).shape[0] == M ? r : out.add(Op::expand, {out.add(Op::reshape, {r}, {{"shape", Shape{}}})}, {{"shape", Shape{M}}});
    };
    // y -> y * a + s, composed step by step (a: none until a scale comes).
    ValueId a = -1, s = c.inputs.size() > 2 ? rw.map(c.inputs[2]) : out.add(Op::expand, {out.add_const({yt.dtype, {}}, std::vector<double>{0.0})},
                                                                           {{"shape", Shape{M}}});
    for (const auto& st : chains[static_cast<size_t>(cv)]->first) {
      const ValueId p = vec(st.p);
      switch (st.op) {
        case Op::mul:
        case Op::div:
          a = a < 0 ? (st.op == Op::mul ? p : out.add(Op::div, {out.add_const({yt.dtype, {}}, std::vector<double>{1.0}), p})) : out.add(st.op, {a, p});
          s = out.add(st.op, {s, p});
          break;
        case Op::add: s = out.add(Op::add, {s, p}); break;
        default: s = out.add(Op::sub, {s, p}); break;
      }
    }
    ValueId w = rw.map(c.inputs[1]);
    if (a >= 0) {
      Shape col(g.type(c.inputs[1]).shape.size(), Dim(1));
      col[0] = M;
      w = out.add(Op::mul, {w, out.add(Op::reshape, {a}, {{"shape", col}})});
    }
    return out.add_raw(Op::conv, {rw.map(c.inputs[0]), w, s}, c.attrs);
  });
  return true;
}

}  // namespace tj
