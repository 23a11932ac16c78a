// Sharding propagation: from the values a user annotated (the weights,
// Megatron style) to every value of a graph with a mesh, through each op's
// factor rule (ir/factors.h), as GSPMD and Shardy do.
//
// A split on one dim of a factor is given to every other dim of that
// factor, forward (operands to result) and backward (result to operands,
// and one operand to another), in sweeps until nothing changes. Operands
// split along a reduction factor (matmul's k, a sum's axis) leave the result
// a partial value over those axes. Priorities, where two dims of one factor
// offer different splits: an annotated value's split first, then the
// operands' in order, then the result's; a dim keeps the split it has. A
// split is not given where it cannot hold: an annotated value (never
// changed), an axis the value already uses, devices that do not divide the
// dim, a symbolic dim, a factor that must stay whole (softmax's axis).
// Those cases are noted in the report as conflicts.
//
// Assumes: the graph has a mesh, and its annotations verify. Guarantees:
// every value then has a sharding that verifies (replicated where nothing
// reached it); annotated values are unchanged; the graph's ops are too.
#include <set>

#include "ir/factors.h"
#include "ir/text.h"
#include "passes/passes.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

class Propagation {
 public:
  explicit Propagation(Graph& g) : g_(g), names_(printed_names(g)), sh_(g.size()), fixed_(g.size(), false), why_(g.size()) {
    for (size_t v = 0; v < g.size(); ++v) {
      sh_[v] = g.sharding_or_whole(static_cast<ValueId>(v));
      fixed_[v] = g.sharding(static_cast<ValueId>(v)) != nullptr;
    }
  }

  std::vector<ShardingChoice> run() {
    rules_.resize(g_.size());
    for (size_t v = 0; v < g_.size(); ++v)
      if (has_rule(static_cast<ValueId>(v))) rules_[v] = factor_rule(g_, static_cast<ValueId>(v));
    for (int sweep = 0; sweep < 64; ++sweep) {
      bool changed = false;
      for (size_t v = 0; v < g_.size(); ++v) changed |= visit(static_cast<ValueId>(v));
      for (size_t v = g_.size(); v-- > 0;) changed |= visit(static_cast<ValueId>(v));
      if (!changed) break;
    }
    std::vector<ShardingChoice> out;
    for (size_t v = 0; v < g_.size(); ++v) {
      if (fixed_[v]) continue;
      const ValueId id = static_cast<ValueId>(v);
      g_.set_sharding(id, sh_[v]);
      if (!why_[v].empty()) out.push_back({id, why_[v]});
    }
    for (const std::string& c : conflicts_) out.push_back({-1, c});
    return out;
  }

 private:
  const std::string& name(ValueId v) const { return names_[static_cast<size_t>(v)]; }
  bool has_rule(ValueId v) const {
    const Op op = g_.node(v).op;
    return op != Op::input && op != Op::param && op != Op::constant;
  }

  bool uses(const Sharding& s, const std::vector<std::string>& axes) const {
    for (const std::string& a : s.axes())
      for (const std::string& b : axes)
        if (a == b) return true;
    return false;
  }

  // Gives dim d of value t the split `axes` from `reason`; whether it took.
  bool give(ValueId t, size_t d, const std::vector<std::string>& axes, const std::string& reason) {
    Sharding& s = sh_[static_cast<size_t>(t)];
    if (s.dims[d] == axes) return false;
    auto conflict = [&](const std::string& what) {
      conflicts_.insert("conflict: " + name(t) + " dim " + std::to_string(d) + " not split over " + axes_str(axes) + " " + reason + ": " + what);
      return false;
    };
    if (fixed_[static_cast<size_t>(t)]) return conflict("it is annotated " + sharded_type_str(g_.type(t), &s));
    if (!s.dims[d].empty()) return conflict("it is split over " + axes_str(s.dims[d]) + " already");
    if (uses(s, axes)) return conflict("it uses " + axes_str(axes) + " already");
    const auto size = g_.type(t).shape[d].as_const();
    const int64_t n = split_count(g_.mesh(), axes);
    if (!size) return conflict("the dim is symbolic");
    if (*size % n != 0) return conflict(std::to_string(n) + " devices do not divide " + std::to_string(*size));
    s.dims[d] = axes;
    why_[static_cast<size_t>(t)] += (why_[static_cast<size_t>(t)].empty() ? "" : "; ") + std::string("dim ") + std::to_string(d) + " over " +
                                    axes_str(axes) + " " + reason;
    return true;
  }

  bool make_partial(ValueId t, const std::vector<std::string>& axes, Reduction r, const std::string& reason) {
    Sharding& s = sh_[static_cast<size_t>(t)];
    for (const auto& [a, red] : s.partial)
      if (a == axes[0]) return false;
    if (fixed_[static_cast<size_t>(t)] || uses(s, axes)) {
      conflicts_.insert("conflict: " + name(t) + " not partial over " + axes_str(axes) + " " + reason);
      return false;
    }
    for (const std::string& a : axes) s.partial.emplace_back(a, r);
    why_[static_cast<size_t>(t)] += (why_[static_cast<size_t>(t)].empty() ? "" : "; ") + std::string("partial ") + reduction_name(r) + " over " +
                                    axes_str(axes) + " " + reason;
    return true;
  }

  bool visit(ValueId v) {
    if (!has_rule(v)) return false;
    const Node& n = g_.node(v);
    const FactorRule& r = rules_[static_cast<size_t>(v)];
    // The tensors of the op, in priority order for offering a split:
    // annotated ones, then operands in order, then the result.
    std::vector<std::pair<ValueId, const std::vector<int>*>> tensors;
    for (size_t o = 0; o < n.inputs.size(); ++o) tensors.push_back({n.inputs[o], &r.operands[o]});
    tensors.push_back({v, &r.result});
    std::vector<size_t> order;
    for (size_t i = 0; i < tensors.size(); ++i)
      if (fixed_[static_cast<size_t>(tensors[i].first)]) order.push_back(i);
    for (size_t i = 0; i < tensors.size(); ++i)
      if (!fixed_[static_cast<size_t>(tensors[i].first)]) order.push_back(i);
    bool changed = false;
    for (size_t f = 0; f < r.factors.size(); ++f) {
      const FactorRule::Factor& fac = r.factors[f];
      if (fac.kind == FactorRule::Kind::replicate) continue;
      std::vector<std::string> axes;
      ValueId from = -1;
      size_t from_dim = 0;
      for (size_t i : order) {
        const auto& [t, dims] = tensors[i];
        for (size_t d = 0; d < dims->size() && axes.empty(); ++d)
          if ((*dims)[d] == static_cast<int>(f) && !sh_[static_cast<size_t>(t)].dims[d].empty()) {
            axes = sh_[static_cast<size_t>(t)].dims[d];
            from = t, from_dim = d;
          }
        if (!axes.empty()) break;
      }
      if (axes.empty()) continue;
      const std::string reason = "from " + name(from) + " dim " + std::to_string(from_dim) + " through " + std::string(n.def().name) + " " + name(v);
      for (const auto& [t, dims] : tensors)
        for (size_t d = 0; d < dims->size(); ++d)
          if ((*dims)[d] == static_cast<int>(f) && !(t == from && d == from_dim)) changed |= give(t, d, axes, reason);
      if (fac.kind == FactorRule::Kind::reduce) changed |= make_partial(v, axes, fac.reduction, reason);
    }
    return changed;
  }

  Graph& g_;
  const std::vector<std::string> names_;  // as printed
  std::vector<Sharding> sh_;
  std::vector<bool> fixed_;
  std::vector<std::string> why_;
  std::vector<FactorRule> rules_;
  std::set<std::string> conflicts_;
};

}  // namespace

std::vector<ShardingChoice> propagate_shardings(Graph& g) {
  if (g.mesh().empty()) throw Error("propagate_shardings: the graph has no mesh");
  return Propagation(g).run();
}

}  // namespace tj
