// simplify: algebraic rewrites that are bit-exact, as declarative rules, one
// per line (a reduction over trailing axes becomes one over them merged, a
// view). Each rule sees a node whose operands are already simplified and
// returns the value that replaces it, or -1. Never rewrites x/c to x*(1/c),
// reassociates, or approximates.
//
// Signed zeros are respected: x + 0.0 is x only where x cannot be -0.0 (a
// matmul or a sum starts from +0.0 and never yields -0.0); x + (-0.0) is
// always x. NaN payloads are not tracked.
#include <cmath>
#include <numeric>

#include "ir/rewriter.h"
#include "passes/passes.h"

namespace tj {

namespace {

// Could this value hold -0.0? Conservative: true unless proven otherwise.
// Whether a value may be -0.0: an algebraic fact about each op (and its
// precision), which this analysis lists by op; an op not listed may be.
class NegZero {
 public:
  explicit NegZero(const Graph& g) : g_(g) {}
  bool may(ValueId v) {
    if (memo_.size() < g_.size()) memo_.resize(g_.size(), -1);  // the graph grows as it is built
    if (memo_[static_cast<size_t>(v)] < 0) memo_[static_cast<size_t>(v)] = compute(v) ? 1 : 0;
    return memo_[static_cast<size_t>(v)] == 1;
  }

 private:
  bool compute(ValueId v) {
    const Node& n = g_.node(v);
    if (!is_float(n.type.dtype)) return false;
    switch (n.op) {
      case Op::constant:
        for (size_t i = 0, size = n.const_data()->size(); i < size; ++i)
          if (double d = (*n.const_data())[i]; d == 0 && std::signbit(d)) return true;
        return false;
      // Accumulating from +0.0 in the node's own precision never yields -0.0:
      // matmul accumulates in f32/f64; sum accumulates in double, so only an
      // f64 sum is safe (an f32 one can round a tiny negative to -0.0), and
      // mean divides, which can underflow to -0.0.
      case Op::matmul: return n.type.dtype != DType::f32 && n.type.dtype != DType::f64;
      case Op::sum: return n.type.dtype != DType::f64;
      case Op::abs: case Op::exp: case Op::sigmoid: case Op::softmax: case Op::causal_mask: case Op::rsqrt:
      case Op::iota:
        return false;
      case Op::add: return may(n.inputs[0]) && may(n.inputs[1]);  // -0 + -0 is the only -0 sum
      case Op::sub: return may(n.inputs[0]);                      // -0 - +0
      case Op::cast: {  // widening float casts keep the sign of zero exactly; narrowing ones can round to -0.0
        DType from = g_.type(n.inputs[0]).dtype;
        if (!is_float(from)) return false;
        bool widening = dtype_size(n.type.dtype) > dtype_size(from) || n.type.dtype == from;
        return !widening || may(n.inputs[0]);
      }
      case Op::reshape: case Op::permute: case Op::expand: case Op::slice: case Op::squeeze: case Op::unsqueeze:
      case Op::amax: case Op::sqrt:
        return may(n.inputs[0]);
      default: return true;
    }
  }
  const Graph& g_;
  std::vector<int8_t> memo_;
};

struct Rules {
  Graph& g;  // the graph being built; operands refer to it
  NegZero& nz;

  const Node& node(ValueId v) const { return g.node(v); }
  bool same_type(ValueId x, const Type& t) const { return g.type(x) == t; }
  bool splat(ValueId v, double x) const { return is_splat(g, v, x); }
  bool no_neg_zero(ValueId v) const { return !nz.may(v); }
  bool is(ValueId v, Op op) const { return node(v).op == op; }

  // Returns the replacement for (op, ins, attrs) : type, or -1.
  ValueId apply(Op op, const std::vector<ValueId>& in, const std::vector<AttrValue>& attrs, const Type& t) {
    auto x = [&](size_t i) { return in[i]; };
    switch (op) {
      case Op::mul:
        if (splat(x(1), 1.0) && same_type(x(0), t)) return x(0);                       // x*1 -> x
        if (splat(x(0), 1.0) && same_type(x(1), t)) return x(1);                       // 1*x -> x
        break;
      case Op::div:
        if (splat(x(1), 1.0) && same_type(x(0), t)) return x(0);                       // x/1 -> x
        break;
      case Op::add:
        if (splat(x(1), -0.0) && same_type(x(0), t)) return x(0);                      // x+(-0) -> x
        if (splat(x(0), -0.0) && same_type(x(1), t)) return x(1);                      // (-0)+x -> x
        if (splat(x(1), 0.0) && same_type(x(0), t) && no_neg_zero(x(0))) return x(0);  // x+0 -> x, x never -0
        if (splat(x(0), 0.0) && same_type(x(1), t) && no_neg_zero(x(1))) return x(1);  // 0+x -> x, x never -0
        break;
      case Op::sub:
        if (splat(x(1), 0.0) && same_type(x(0), t)) return x(0);                       // x-0 -> x
        if (splat(x(1), -0.0) && same_type(x(0), t) && no_neg_zero(x(0))) return x(0); // x-(-0) -> x, x never -0
        break;
      case Op::neg:
        if (is(x(0), Op::neg)) return node(x(0)).inputs[0];                             // -(-x) -> x
        break;
      case Op::cast:
        if (g.type(x(0)).dtype == t.dtype) return x(0);                                // cast to own dtype -> x
        break;
      case Op::where:
        if (x(1) == x(2) && same_type(x(1), t)) return x(1);                           // where(c, x, x) -> x
        break;
      case Op::concat:
        if (in.size() == 1) return x(0);                                               // concat(x) -> x
        break;
      case Op::permute: {
        const auto& p = std::get<std::vector<int64_t>>(attrs[0]);
        if (is_identity(p)) return x(0);                                               // permute(x, id) -> x
        if (is(x(0), Op::permute)) {                                                   // permute(permute(x,p),q) -> permute(x,p∘q)
          const auto& inner = node(x(0)).attr_ints("perm");
          std::vector<int64_t> composed;
          for (int64_t i : p) composed.push_back(inner[static_cast<size_t>(i)]);
          ValueId base = node(x(0)).inputs[0];
          return is_identity(composed) ? base : g.add(Op::permute, {base}, {{"perm", composed}});
        }
        break;
      }
      case Op::squeeze:
      case Op::unsqueeze:
        return reshape_to(x(0), t);                                                    // squeeze/unsqueeze -> reshape
      case Op::reshape:
        if (same_type(x(0), t)) return x(0);                                           // reshape to own shape -> x
        if (is(x(0), Op::reshape)) return reshape_to(node(x(0)).inputs[0], t);         // reshape(reshape(x)) -> reshape(x)
        break;
      case Op::expand:
        if (same_type(x(0), t)) return x(0);                                           // expand to own shape -> x
        if (is(x(0), Op::expand)) return g.add(Op::expand, {node(x(0)).inputs[0]}, {{"shape", t.shape}});  // expand(expand(x)) -> expand(x)
        break;
      case Op::slice:
        if (same_type(x(0), t) && std::get<Dim>(attrs[1]) == Dim(0) && std::get<int64_t>(attrs[3]) == 1) return x(0);  // x[0:n] -> x
        break;
      case Op::sum:
      case Op::amax:
      case Op::mean:
      case Op::prod:
        return trailing_reduction(op, x(0), std::get<std::vector<int64_t>>(attrs[0]), t);  // over the last k >= 2 axes -> over one
      default: break;
    }
    return -1;
  }

  // A reduction over the last k >= 2 axes of x (a global pool over H, W) as
  // one over them merged: the same elements in the same order (the
  // interpreter's result is bit-identical), and a last-axis reduction,
  // which fusion makes a row kernel.
  ValueId trailing_reduction(Op op, ValueId x, const std::vector<int64_t>& axes, const Type& t) {
    const Shape& xs = g.type(x).shape;
    const int64_t r = static_cast<int64_t>(xs.size()), k = static_cast<int64_t>(axes.size());
    if (k < 2) return -1;
    for (int64_t i = 0; i < k; ++i)
      if (axes[static_cast<size_t>(i)] != r - k + i) return -1;
    Shape merged(xs.begin(), xs.end() - k);
    merged.push_back(numel(Shape(xs.end() - k, xs.end())));
    const ValueId m = g.add(Op::reshape, {x}, {{"shape", merged}});
    return reshape_to(g.add(op, {m}, {{"axes", std::vector<int64_t>{r - k}}, {"keepdim", false}}), t);
  }

  static bool is_identity(const std::vector<int64_t>& p) {
    for (size_t i = 0; i < p.size(); ++i)
      if (p[i] != static_cast<int64_t>(i)) return false;
    return true;
  }
  ValueId reshape_to(ValueId x, const Type& t) {
    if (same_type(x, t)) return x;
    if (is(x, Op::reshape)) x = node(x).inputs[0];
    return same_type(x, t) ? x : g.add(Op::reshape, {x}, {{"shape", t.shape}});
  }
};

bool simplify_once(Graph& g) {
  bool changed = false;
  Rewriter rw(g);
  Graph& out = rw.out();
  NegZero nz(out);
  Rules rules{out, nz};
  g = rw.run([&](ValueId v) -> ValueId {
    const Node& n = g.node(v);
    if (n.def().category == OpCategory::source) return Rewriter::kCopy;
    ValueId r = rules.apply(n.op, rw.map_all(n.inputs), n.attrs, n.type);
    if (r < 0) return Rewriter::kCopy;
    changed = true;
    return r;
  });
  return changed;
}

}  // namespace

bool simplify(Graph& g, const PassOptions&) {
  bool changed = false;
  // Rules see simplified operands, so one sweep does most; repeat to a fixpoint.
  for (int i = 0; i < 8 && simplify_once(g); ++i) changed = true;
  return changed;
}

}  // namespace tj
