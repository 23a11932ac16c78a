// The collectives a graph's shardings call for: where an op reads an
// operand laid out otherwise than its factor rule (ir/factors.h) and its
// result's sharding need, what moves the operand there, and its bytes.
// The SPMD partitioner inserts these; `tjc partition --report` prints them.
//
// Per op, each factor is split as its result dims are (a reduction factor
// as the operands split it, where the result is partial over those axes;
// a whole factor, and one the result lacks, not at all), and each operand
// dim must be split as its factor. From an operand's sharding to that:
// partial axes first, by an all-reduce, or a reduce-scatter where the
// operand is needed split over exactly those axes along a dim it has whole;
// then an axis that moves from one dim to another by an all-to-all; then
// splits the op needs whole by an all-gather; and splits the op needs that
// the operand lacks by a local slice (each device takes its block: no
// communication). A graph output that is partial is all-reduced; outputs
// keep their splits (the caller gets each device's block).
//
// Bytes are one device's: `bytes` the operand's block before the
// collective; `wire_bytes` what a device sends with ring algorithms over N
// devices: all-reduce 2(N-1)/N, reduce-scatter and all-to-all (N-1)/N,
// all-gather N-1 times the block. Symbolic sizes count at the graph's hint.
#include <algorithm>

#include "ir/factors.h"
#include "ir/text.h"
#include "passes/passes.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

class Planner {
 public:
  explicit Planner(const Graph& g) : g_(g), hint_(size_hint(g, {})) {
    for (size_t v = 0; v < g.size(); ++v) sh_.push_back(g.sharding_or_whole(static_cast<ValueId>(v)));
  }

  std::vector<Collective> run() {
    for (size_t v = 0; v < g_.size(); ++v) {
      const ValueId id = static_cast<ValueId>(v);
      const Op op = g_.node(id).op;
      if (op == Op::input || op == Op::param || op == Op::constant) continue;
      visit(id);
    }
    for (ValueId o : g_.outputs()) {
      const Sharding& s = sh_[static_cast<size_t>(o)];
      if (s.partial.empty()) continue;
      Sharding to = s;
      to.partial.clear();
      reshard(o, -1, to);
    }
    return out_;
  }

 private:
  void visit(ValueId v) {
    const Node& n = g_.node(v);
    const FactorRule r = factor_rule(g_, v);
    const Sharding& res = sh_[static_cast<size_t>(v)];
    std::vector<std::vector<std::string>> axes(r.factors.size());
    // A result dim split more ways than its factor holds (a reshape's
    // factor is the gcd of its major dims: GQA's 2 KV heads repeated to 8
    // heads split 4 ways) is computed whole, then each device takes its
    // block: a slice after the op.
    Sharding computed = res;
    for (size_t d = 0; d < r.result.size(); ++d) {
      const int f = r.result[d];
      if (f < 0 || r.factors[static_cast<size_t>(f)].kind != FactorRule::Kind::pass) continue;
      const auto size = r.factors[static_cast<size_t>(f)].size.as_const();
      if (res.dims[d].empty() || (size && *size % split_count(g_.mesh(), res.dims[d]) == 0)) axes[static_cast<size_t>(f)] = res.dims[d];
      else computed.dims[d].clear();
    }
    if (!(computed == res)) add(Collective::Kind::slice, v, v, computed, res, {});
    // A reduction factor: split as an operand splits it, where the result
    // is partial over those axes with the factor's reduction.
    for (size_t f = 0; f < r.factors.size(); ++f) {
      if (r.factors[f].kind != FactorRule::Kind::reduce) continue;
      for (size_t o = 0; o < n.inputs.size() && axes[f].empty(); ++o)
        for (size_t d = 0; d < r.operands[o].size(); ++d) {
          const std::vector<std::string>& a = sh_[static_cast<size_t>(n.inputs[o])].dims[d];
          if (r.operands[o][d] != static_cast<int>(f) || a.empty()) continue;
          bool partial = true;
          for (const std::string& x : a)
            partial &= std::any_of(res.partial.begin(), res.partial.end(),
                                   [&](const auto& p) { return p.first == x && p.second == r.factors[f].reduction; });
          if (partial) axes[f] = a;
          break;
        }
    }
    for (size_t o = 0; o < n.inputs.size(); ++o) {
      const ValueId x = n.inputs[o];
      Sharding need;
      for (size_t d = 0; d < r.operands[o].size(); ++d) {
        const int f = r.operands[o][d];
        need.dims.push_back(f >= 0 ? axes[static_cast<size_t>(f)] : std::vector<std::string>{});
      }
      reshard(x, v, need);
    }
  }

  int64_t local_bytes(ValueId v, const Sharding& s) const {
    const Type& t = g_.type(v);
    int64_t n = dtype_size(t.dtype);
    for (size_t d = 0; d < t.shape.size(); ++d) n *= t.shape[d].eval(hint_) / (d < s.dims.size() ? split_count(g_.mesh(), s.dims[d]) : 1);
    return n;
  }

  void add(Collective::Kind kind, ValueId v, ValueId consumer, const Sharding& from, const Sharding& to, std::vector<std::string> axes) {
    if (axes.empty())  // a slice after an op: the axes it splits by
      for (size_t d = 0; d < to.dims.size(); ++d)
        if (from.dims[d] != to.dims[d]) axes.insert(axes.end(), to.dims[d].begin(), to.dims[d].end());
    for (const Collective& c : out_)  // a value moved alike for an earlier reader: reused
      if (c.value == v && c.kind == kind && c.from == from && c.to == to) return;
    Collective c{kind, v, consumer, from, to, std::move(axes), local_bytes(v, from), 0};
    const int64_t n = split_count(g_.mesh(), c.axes);
    switch (kind) {
      case Collective::Kind::all_reduce: c.wire_bytes = 2 * (n - 1) * c.bytes / n; break;
      case Collective::Kind::reduce_scatter:
      case Collective::Kind::all_to_all: c.wire_bytes = (n - 1) * c.bytes / n; break;
      case Collective::Kind::all_gather: c.wire_bytes = (n - 1) * c.bytes; break;
      case Collective::Kind::slice: break;
    }
    out_.push_back(std::move(c));
  }

  // From v's sharding to `need` (dims only: the op reads complete values).
  void reshard(ValueId v, ValueId consumer, const Sharding& need) {
    Sharding s = sh_[static_cast<size_t>(v)];
    if (!s.partial.empty()) {
      std::vector<std::string> p;
      for (const auto& [a, red] : s.partial) p.push_back(a);
      Sharding to = s;
      to.partial.clear();
      // A reduce-scatter where the op needs v split over exactly those axes along a dim v has whole.
      size_t scatter = s.dims.size();
      for (size_t d = 0; d < s.dims.size() && scatter == s.dims.size(); ++d)
        if (s.dims[d].empty() && need.dims[d] == p) scatter = d;
      if (scatter < s.dims.size()) to.dims[scatter] = p;
      add(scatter < s.dims.size() ? Collective::Kind::reduce_scatter : Collective::Kind::all_reduce, v, consumer, s, to, p);
      s = to;
    }
    // An axis that moves between dims: an all-to-all.
    for (size_t d1 = 0; d1 < s.dims.size(); ++d1) {
      if (s.dims[d1].empty() || !need.dims[d1].empty()) continue;
      for (size_t d2 = 0; d2 < s.dims.size(); ++d2) {
        if (d2 == d1 || !s.dims[d2].empty() || need.dims[d2] != s.dims[d1]) continue;
        Sharding to = s;
        to.dims[d2] = s.dims[d1];
        to.dims[d1].clear();
        add(Collective::Kind::all_to_all, v, consumer, s, to, s.dims[d1]);
        s = to;
        break;
      }
    }
    for (size_t d = 0; d < s.dims.size(); ++d) {
      if (s.dims[d].empty() || s.dims[d] == need.dims[d]) continue;
      Sharding to = s;
      to.dims[d].clear();
      add(Collective::Kind::all_gather, v, consumer, s, to, s.dims[d]);
      s = to;
    }
    for (size_t d = 0; d < s.dims.size(); ++d) {
      if (need.dims[d].empty() || s.dims[d] == need.dims[d]) continue;
      Sharding to = s;
      to.dims[d] = need.dims[d];
      add(Collective::Kind::slice, v, consumer, s, to, need.dims[d]);
      s = to;
    }
  }

  const Graph& g_;
  const SymEnv hint_;
  std::vector<Sharding> sh_;
  std::vector<Collective> out_;
};

}  // namespace

const char* collective_name(Collective::Kind k) {
  switch (k) {
    case Collective::Kind::all_reduce: return "all_reduce";
    case Collective::Kind::reduce_scatter: return "reduce_scatter";
    case Collective::Kind::all_gather: return "all_gather";
    case Collective::Kind::all_to_all: return "all_to_all";
    case Collective::Kind::slice: return "slice";
  }
  return "?";
}

std::string collectives_report(const Graph& g, const std::vector<Collective>& plan) {
  const std::vector<std::string> names = printed_names(g);
  std::string out;
  for (const Collective& c : plan) {
    std::string axes;
    for (size_t i = 0; i < c.axes.size(); ++i) axes += (i ? "," : "") + c.axes[i];
    const std::string op = c.consumer < 0 ? "" : std::string(g.node(c.consumer).def().name) + " " + names[static_cast<size_t>(c.consumer)];
    const std::string reader = c.consumer < 0 ? " for the output" : c.consumer == c.value ? " after " + op : " for " + op;
    out += std::string(collective_name(c.kind)) + " " + names[static_cast<size_t>(c.value)] + reader + (axes.empty() ? "" : " over " + axes) + ": " +
           sharded_type_str(g.type(c.value), &c.from) + " -> " + sharded_type_str(g.type(c.value), &c.to) + ", " + std::to_string(c.bytes) + " B, " +
           std::to_string(c.wire_bytes) + " B sent\n";
  }
  return out;
}

std::vector<Collective> plan_collectives(const Graph& g) {
  if (g.mesh().empty()) throw Error("plan_collectives: the graph has no mesh");
  return Planner(g).run();
}

}  // namespace tj
