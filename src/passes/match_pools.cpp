// match_pools: max pooling and the sums of average pooling in their window
// form, as the frontends build them (frontend/nn/window.cpp: the ONNX
// importer, the torch backend's aten rows, the C++ builders), become one
// max_pool or sum_pool node:
//
//   p = concat(F, p, F) along spatial axes   (any number, each pad optional;
//                                             F a splat of -inf for max,
//                                             of +0 for a sum)
//   w_t = slice(..slice(p, a1)..)            one strided slice per spatial
//                                             axis and tap; the taps' starts
//                                             on each axis 0, d, 2d, ..
//   y = max(max(w_0, w_1), .. w_T-1)         in any order and grouping
//   y = add(add(w_0, w_1), .. w_T-1)         the taps in row-major order,
//                                             added one at a time (either
//                                             operand order: IEEE addition
//                                             commutes), f32 and f64
//
// where the taps form the whole grid of a kernel, every slice has the same
// step on its axis, and every window reads the output's length. The inner
// max or add nodes must have no other readers. The values are the same, bit
// for bit: the IEEE maximum of a set does not depend on the order (only
// which NaN's payload a NaN result carries could), and a sum is matched only
// in the order sum_pool adds. An average pool's division by its window
// counts stays an op of its own (an epilogue of the pool's kernel). Runs
// after constant_fold (the pads are splats then) and before assign_layouts,
// which puts the pools channels last beside the convolutions.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "ir/rewriter.h"
#include "passes/passes.h"

namespace tj {

namespace {

constexpr int64_t kMax = int64_t{1} << 31;  // max_pool's bound on strides, dilations and pads

struct Pool {
  ValueId x = -1;
  std::vector<int64_t> kernel, stride, dilation, pad_begin, pad_end;
};

// A splat of the fold's padding: -inf for max, +0 for add (a constant, or
// a scalar one expanded).
bool pad_fill(const Graph& g, ValueId v, Op fold) {
  const Node& n = g.node(v);
  if (n.op == Op::expand) return pad_fill(g, n.inputs[0], fold);
  if (n.op != Op::constant || n.const_data()->size() != 1) return false;
  const double f = (*n.const_data())[0];
  return fold == Op::max ? std::isinf(f) && f < 0 : f == 0 && !std::signbit(f);
}

class Matcher {
 public:
  explicit Matcher(const Graph& g) : g_(g), users_(users_of(g)) {}

  // The max tree rooted at `root`: its leaves, and its inner max nodes.
  void tree(ValueId root, std::vector<ValueId>* leaves, std::vector<ValueId>* inner) const {
    std::vector<ValueId> stack{root};
    while (!stack.empty()) {
      const ValueId u = stack.back();
      stack.pop_back();
      const Node& n = g_.node(u);
      if (n.op == Op::max && (u == root || users_[static_cast<size_t>(u)].size() == 1)) {
        inner->push_back(u);
        stack.push_back(n.inputs[1]), stack.push_back(n.inputs[0]);
      } else {
        leaves->push_back(u);
      }
    }
  }

  // A sum added one leaf at a time from `root` down: its leaves in the
  // order they are added, and its adds; false where it is not one chain
  // of slices (stopping at the first other leaf: a sum that is no pool
  // costs a step or two, not a walk down a long chain of adds).
  bool chain(ValueId root, std::vector<ValueId>* leaves, std::vector<ValueId>* inner) const {
    auto is_inner = [&](ValueId w) { return g_.node(w).op == Op::add && users_[static_cast<size_t>(w)].size() == 1; };
    auto is_slice = [&](ValueId w) { return g_.node(w).op == Op::slice; };
    std::vector<ValueId> added;  // last first
    for (ValueId u = root;;) {
      inner->push_back(u);
      const ValueId a = g_.node(u).inputs[0], b = g_.node(u).inputs[1];
      const bool ia = is_inner(a), ib = is_inner(b);
      if (ia && ib) return false;
      if (!ia && !ib) {
        if (!is_slice(a) || !is_slice(b)) return false;
        added.push_back(b), added.push_back(a);
        break;
      }
      if (!is_slice(ia ? b : a)) return false;
      added.push_back(ia ? b : a);
      u = ia ? a : b;
    }
    leaves->assign(added.rbegin(), added.rend());
    return true;
  }

  std::optional<Pool> match(ValueId root) const {
    const Node& r = g_.node(root);
    const int64_t rank = r.type.rank();
    const Op fold = r.op;
    if (!is_float(r.type.dtype) || rank < 3) return std::nullopt;
    // Sums in f32 and f64 (the window form rounds each add to a 16-bit type).
    if (fold == Op::add && r.type.dtype != DType::f32 && r.type.dtype != DType::f64) return std::nullopt;
    std::vector<ValueId> leaves, inner;
    if (fold == Op::max) tree(root, &leaves, &inner);
    else if (!chain(root, &leaves, &inner)) return std::nullopt;
    if (leaves.size() < 2) return std::nullopt;
    const size_t k = static_cast<size_t>(rank - 2);
    // Each leaf: a slice per spatial axis (an axis without one: start 0, step 1) of one base.
    struct Tap {
      std::vector<int64_t> start, step;
    };
    std::vector<Tap> taps;
    ValueId base = -1;
    for (ValueId l : leaves) {
      if (g_.type(l) != r.type) return std::nullopt;  // a max that broadcasts (relu as max(x, 0)) is no window
      Tap t{std::vector<int64_t>(k, -1), std::vector<int64_t>(k, -1)};
      std::vector<int64_t> end(k, -1);
      ValueId u = l;
      while (g_.node(u).op == Op::slice) {
        const Node& s = g_.node(u);
        int64_t a = s.attr_int("axis");
        a = a < 0 ? a + rank : a;
        const auto start = s.attr_dim("start").as_const(), stop = s.attr_dim("end").as_const();
        if (a < 2 || !start || !stop || t.start[static_cast<size_t>(a - 2)] >= 0) return std::nullopt;
        t.start[static_cast<size_t>(a - 2)] = *start, t.step[static_cast<size_t>(a - 2)] = s.attr_int("step");
        end[static_cast<size_t>(a - 2)] = *stop;
        u = s.inputs[0];
      }
      if (base >= 0 && u != base) return std::nullopt;
      base = u;
      const Shape& bs = g_.type(base).shape;
      if (static_cast<int64_t>(bs.size()) != rank) return std::nullopt;
      for (size_t i = 0; i < k; ++i) {
        const Dim& out = r.type.shape[i + 2];
        if (!out.is_const() || !bs[i + 2].is_const()) return std::nullopt;
        if (t.start[i] < 0) t.start[i] = 0, t.step[i] = 1, end[i] = bs[i + 2].value();
        // Within what max_pool accepts (strides up to 2^31), and no overflow below.
        if (out.value() < 1 || t.step[i] < 1 || t.step[i] > kMax || end[i] < t.start[i] || end[i] > bs[i + 2].value() || bs[i + 2].value() > kMax * kMax)
          return std::nullopt;
        if ((end[i] - t.start[i] + t.step[i] - 1) / t.step[i] != out.value()) return std::nullopt;
      }
      taps.push_back(std::move(t));
    }
    // The base: x padded with -inf on spatial axes.
    Pool p;
    p.pad_begin.assign(k, 0), p.pad_end.assign(k, 0);
    std::vector<bool> peeled(k, false);
    ValueId x = base;
    for (;;) {
      const Node& n = g_.node(x);
      if (n.op != Op::concat) break;
      int64_t a = n.attr_int("axis");
      a = a < 0 ? a + rank : a;
      if (a < 2 || peeled[static_cast<size_t>(a - 2)]) break;
      size_t at = 0;
      while (at < n.inputs.size() && pad_fill(g_, n.inputs[at], fold)) ++at;
      if (at + 1 > n.inputs.size()) break;
      int64_t before = 0, after = 0;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (i == at) continue;
        if (!pad_fill(g_, n.inputs[i], fold)) return std::nullopt;
        const Dim& len = g_.type(n.inputs[i]).shape[static_cast<size_t>(a)];
        if (!len.is_const()) return std::nullopt;
        (i < at ? before : after) += len.value();
      }
      peeled[static_cast<size_t>(a - 2)] = true;
      p.pad_begin[static_cast<size_t>(a - 2)] = before, p.pad_end[static_cast<size_t>(a - 2)] = after;
      x = n.inputs[at];
    }
    if (pad_fill(g_, x, fold)) return std::nullopt;
    p.x = x;
    // Per axis: one step, the starts 0, d, 2d, .. (the kernel's taps), the whole grid once.
    size_t grid = 1;
    std::vector<std::map<int64_t, int64_t>> index(k);
    for (size_t i = 0; i < k; ++i) {
      std::set<int64_t> starts;
      for (const Tap& t : taps) {
        if (t.step[i] != taps[0].step[i]) return std::nullopt;
        starts.insert(t.start[i]);
      }
      const std::vector<int64_t> s(starts.begin(), starts.end());
      const int64_t d = s.size() > 1 ? s[1] - s[0] : 1;
      if (s[0] != 0 || d < 1) return std::nullopt;
      for (size_t j = 0; j < s.size(); ++j) {
        if (s[j] != static_cast<int64_t>(j) * d) return std::nullopt;
        index[i][s[j]] = static_cast<int64_t>(j);
      }
      if (d > kMax || p.pad_begin[i] > kMax || p.pad_end[i] > kMax) return std::nullopt;
      p.kernel.push_back(static_cast<int64_t>(s.size())), p.stride.push_back(taps[0].step[i]), p.dilation.push_back(d);
      grid *= s.size();
    }
    if (grid != taps.size()) return std::nullopt;
    std::set<std::vector<int64_t>> seen;
    for (const Tap& t : taps)
      if (!seen.insert(t.start).second) return std::nullopt;
    // A sum's leaves in row-major order of their taps, as sum_pool adds them
    // (the first two in either order: w_0 + w_1 is w_1 + w_0).
    if (fold == Op::add)
      for (size_t j = 0; j < taps.size(); ++j) {
        int64_t at = 0;
        for (size_t i = 0; i < k; ++i) at = at * p.kernel[i] + index[i].at(taps[j].start[i]);
        if (at != static_cast<int64_t>(j) && !(j < 2 && at == static_cast<int64_t>(1 - j))) return std::nullopt;
      }
    // The op's own output length: the pads at the end that windows read
    // (a ceil-mode pad beyond the last window is dropped).
    const Shape& xs = g_.type(x).shape;
    for (size_t i = 0; i < k; ++i) {
      if (!xs[i + 2].is_const()) return std::nullopt;
      const int64_t in = xs[i + 2].value(), o = r.type.shape[i + 2].value(), span = (p.kernel[i] - 1) * p.dilation[i] + 1;
      const int64_t need = std::max<int64_t>(0, (o - 1) * p.stride[i] + span - in - p.pad_begin[i]);
      if (need > p.pad_end[i]) return std::nullopt;
      p.pad_end[i] = need;
      if ((in + p.pad_begin[i] + p.pad_end[i] - span) / p.stride[i] + 1 != o) return std::nullopt;
    }
    for (ValueId v : inner) consumed_.insert(v);
    return p;
  }

  bool consumed(ValueId v) const { return consumed_.count(v) > 0; }

 private:
  const Graph& g_;
  std::vector<std::vector<ValueId>> users_;
  mutable std::set<ValueId> consumed_;
};

}  // namespace

bool match_pools(Graph& g, const PassOptions&) {
  Matcher m(g);
  std::map<ValueId, Pool> found;
  for (ValueId v = static_cast<ValueId>(g.size()); v-- > 0;)
    if ((g.node(v).op == Op::max || g.node(v).op == Op::add) && !m.consumed(v))
      if (auto p = m.match(v)) found.emplace(v, std::move(*p));
  if (found.empty()) return false;
  Rewriter rw(g);
  g = rw.run([&](ValueId v) -> ValueId {
    auto it = found.find(v);
    if (it == found.end()) return Rewriter::kCopy;
    const Pool& p = it->second;
    const Op op = g.node(v).op == Op::max ? Op::max_pool : Op::sum_pool;
    return rw.out().add(op, {rw.map(p.x)}, {{"kernel", p.kernel}, {"stride", p.stride}, {"dilation", p.dilation}, {"pad_begin", p.pad_begin},
                                                    {"pad_end", p.pad_end}});
  });
  return true;
}

}  // namespace tj
