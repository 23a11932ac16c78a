#include "schedule/fusion.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <set>

#include "ir/layout.h"
#include "ir/rewriter.h"
#include "support/log.h"
#include "tensorjit/error.h"

namespace tj {

std::string_view kernel_kind_name(KernelKind k) {
  static constexpr std::array<std::string_view, 7> names = {"pointwise", "rowwise", "reduction", "matmul", "attention", "conv", "pool"};
  return names[static_cast<size_t>(k)];
}

namespace {

bool kv_write_in_place(const Graph& g, ValueId kv) {
  ValueId cache = g.node(kv).inputs[0];
  if (g.node(cache).op != Op::input) return false;
  for (ValueId o : g.outputs())
    if (o == cache) return false;
  for (const Node& n : g.nodes())
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (n.inputs[i] == cache && &n != &g.node(kv)) return false;
  return true;
}

Fuse fuse_of(Op op) { return op_def(op).fuse; }
bool is_store(Op op) { return fuse_of(op) == Fuse::store; }

// Byte and flop counts: symbolic dims are counted at the hint fuse() was
// given (decisions compare the symbolic sizes themselves).
struct Counts {
  SymEnv hint;
  int64_t size(const Dim& d) const { return d.is_const() ? d.value() : d.eval(hint); }
  int64_t elems(const Type& t) const {
    if (auto c = numel_const(t.shape)) return *c;
    return numel(t.shape).eval(hint);
  }
  int64_t bytes(const Type& t) const { return elems(t) * dtype_size(t.dtype); }
  int64_t flops(const Graph& g, const Node& n) const;
};

// An integer division whose divisor may be zero: it must run where it is
// (free index math is recomputed only where read, and might not be).
bool may_fail(const Graph& g, const Node& n) {
  if (!n.def().int_divides) return false;
  const Node& d = g.node(n.inputs[1]);
  if (d.op != Op::constant) return true;
  for (size_t i = 0; i < d.const_data()->size(); ++i)
    if ((*d.const_data())[i] == 0) return true;
  return false;
}

// A constant or param, or a view of one (quantize_weights' packed int8
// weights are reshape(permute(constant))).
bool is_stored_weight(const Graph& g, ValueId v) {
  while (g.node(v).def().category == OpCategory::view) v = g.node(v).inputs[0];
  return g.node(v).op == Op::constant || g.node(v).op == Op::param;
}

// Free values, in one forward sweep (operands come first).
std::vector<bool> free_values(const Graph& g) {
  std::vector<bool> f(g.size(), false), pure(g.size(), false);
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    auto all_free = [&](size_t from) {
      for (size_t k = from; k < n.inputs.size(); ++k)
        if (!f[static_cast<size_t>(n.inputs[k])]) return false;
      return true;
    };
    Fuse c = n.def().fuse;
    // Pure: computable from inputs, params, constants and generators alone.
    bool operands_pure = true;
    for (ValueId o : n.inputs) operands_pure = operands_pure && pure[static_cast<size_t>(o)];
    if (n.def().category == OpCategory::source) pure[i] = f[i] = true;
    else if (c == Fuse::view) f[i] = true, pure[i] = operands_pure;
    else if (c == Fuse::generator) pure[i] = f[i] = operands_pure;
    else if (is_int(n.type.dtype) && c == Fuse::pointwise && all_free(0) && operands_pure && !may_fail(g, n)) pure[i] = f[i] = true;  // index math
    else if (c == Fuse::gather && pure[static_cast<size_t>(n.inputs[1])]) f[i] = true;  // indirect load
    else if (n.op == Op::cast && is_stored_weight(g, n.inputs[0]))
      pure[i] = f[i] = true;  // a weight read converted (quantize_weights; the program cache makes its constants params)
  }
  // A free computation that is itself an output must be computed by a kernel.
  for (ValueId v : g.outputs()) {
    const Node& n = g.node(v);
    if (n.def().category != OpCategory::source && n.def().category != OpCategory::view) f[static_cast<size_t>(v)] = false;
  }
  return f;
}

ValueId base_of(const Graph& g, const std::vector<bool>& free, ValueId v) {
  for (;;) {
    const Node& n = g.node(v);
    if (n.def().category == OpCategory::view) v = n.inputs[0];
    else if (n.def().fuse == Fuse::gather && free[static_cast<size_t>(v)]) v = n.inputs[0];
    else if (n.op == Op::cast && free[static_cast<size_t>(v)]) v = n.inputs[0];  // its bytes are the constant's
    else break;
  }
  const Node& n = g.node(v);
  if (n.op == Op::constant && n.const_data()->size() == 1) return -1;  // a splat is an immediate
  if (free[static_cast<size_t>(v)] && n.def().category != OpCategory::source) return -1;  // generated
  return v;
}

// The op row's FLOPs model (src/ir/ops/).
int64_t Counts::flops(const Graph& g, const Node& n) const {
  const OpDef& def = n.def();
  if (!def.flops_fn) return def.flops * elems(n.type);
  auto sizes = [&](const Shape& s) {
    std::vector<int64_t> v;
    for (const Dim& d : s) v.push_back(size(d));
    return v;
  };
  std::vector<std::vector<int64_t>> in;
  for (ValueId o : n.inputs) in.push_back(sizes(g.type(o).shape));
  std::vector<int64_t> out = sizes(n.type.shape);
  std::vector<double> k = scalar_attrs(def, n.attrs);
  return def.flops_fn(CostArgs{in, out, k.data()});
}

class Partitioner {
 public:
  Partitioner(const Graph& g, const FusionOptions& o)
      : g_(g), o_(o), counts_{size_hint(g, o.size_hint)}, free_(free_values(g)), users_(users_of(g)) {
    s_.kernel_of.assign(g.size(), -1);
    s_.in_place.assign(g.size(), -1);
    for (size_t i = 0; i < g.size(); ++i)
      if (g.nodes()[i].op == Op::kv_write && kv_write_in_place(g, static_cast<ValueId>(i))) s_.in_place[i] = g.nodes()[i].inputs[0];
  }

  Schedule run(const std::vector<Donation>& donate) {
    for (size_t i = 0; i < g_.size(); ++i) {
      if (free_[i]) continue;
      place(static_cast<ValueId>(i));
    }
    if (o_.pointwise) merge_pointwise();
    account();
    bool donated = false;
    for (const Donation& d : donate) donated |= honor(d);
    if (donated) order_kernels();
    return std::move(s_);
  }

 private:
  ValueId base(ValueId v) const { return base_of(g_, free_, v); }
  int kernel(ValueId v) const { return s_.kernel_of[static_cast<size_t>(v)]; }

  int new_kernel(ValueId v, KernelKind kind, Shape space) {
    s_.kernels.push_back(Kernel{kind, {}, {}, {}, std::move(space)});
    row_space_.emplace_back();
    add(static_cast<int>(s_.kernels.size()) - 1, v);
    return static_cast<int>(s_.kernels.size()) - 1;
  }
  void add(int k, ValueId v) {
    s_.kernels[static_cast<size_t>(k)].ops.push_back(v);
    s_.kernel_of[static_cast<size_t>(v)] = k;
  }

  // Whether operand i of n is read (kv_write's cache is not, when in place).
  bool reads_operand(const Node& n, ValueId v, size_t i) const {
    return !(n.op == Op::kv_write && i == 0 && s_.writes_in_place(v));
  }

  // The latest kernel this node depends on, directly or through free values;
  // `direct` says whether every read of it is a plain operand (joinable: a
  // read through a view would need the whole value written first).
  int latest_dependency(ValueId v, bool* direct) const {
    const Node& n = g_.node(v);
    int latest = -1;
    *direct = false;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!reads_operand(n, v, i)) continue;
      ValueId o = n.inputs[i];
      ValueId b = base(o);
      if (b < 0) continue;
      int k = kernel(b);
      if (k < 0) continue;
      // A gather reads its table at the indices it loads, not at its own
      // index: like a read through a view, the table must be complete first.
      bool plain = o == b && !(n.def().fuse == Fuse::gather && i == 0);
      if (k > latest) {
        latest = k;
        *direct = plain;
      } else if (k == latest) {
        *direct = *direct && plain;
      }
    }
    return latest;
  }

  bool last_axis_reduction(const Node& n) const {
    if (n.def().fuse == Fuse::reduction) {
      const auto& axes = n.attr_ints("axes");
      return axes.size() == 1 && axes[0] == g_.type(n.inputs[0]).rank() - 1;
    }
    // A row kernel's composites work on the last axis (softmax's is an attribute).
    return n.def().fuse == Fuse::rowwise && (n.op != Op::softmax || n.attr_int("axis") == n.type.rank() - 1);
  }

  // Every user is a last-axis reduction: better fused there than as an epilogue.
  bool feeds_only_reductions(ValueId v) const {
    const auto& us = users_[static_cast<size_t>(v)];
    if (us.empty()) return false;
    for (ValueId u : us)
      if (u < 0 || !last_axis_reduction(g_.node(u))) return false;
    return true;
  }

  // A channels-last grouped conv of a width no vector form takes
  // (ir/layout.h, grouped_by_library: 12, 24, ...) runs by the matrix library: the generated
  // form goes one channel at a time. Its kernel takes only the library's
  // epilogue: a ReLU or a clip of the conv's value, or a residual add and
  // at most one of those after it (codegen's library_epilogue); any other
  // op, or sums over its positions, would leave it to the generated form,
  // about 10x slower than a pointwise kernel of their own.
  bool library_width_conv(const Kernel& K) const {
    if (o_.library_vector_floats <= 0) return false;
    const Node& c = g_.node(K.ops[0]);
    if (c.op != Op::conv || !c.attr_bool("channels_last")) return false;
    return grouped_by_library(g_.type(c.inputs[1]).shape, c.attr_int("groups"), o_.library_vector_floats);
  }
  bool library_epilogue_op(const Kernel& K, const Node& n) const {
    const ValueId last = K.ops.back();
    const bool act = (n.op == Op::relu || n.op == Op::clip) && !n.inputs.empty() && n.inputs[0] == last;
    if (K.ops.size() == 1) return act || (n.op == Op::add && n.inputs.size() == 2 && (n.inputs[0] == last) != (n.inputs[1] == last));
    return K.ops.size() == 2 && g_.node(last).op == Op::add && act;
  }

  // A sum or mean of f32 over every spatial axis of a value that the
  // channels-last conv kernel K computes (FusionOptions::conv_reductions):
  // global average pooling, a squeeze-excitation's squeeze. Its operand may
  // be that value reshaped with the image and channel dims kept ([N, H, W,
  // C] as [N, H*W, C]: simplify merges the axes). The kernel sums it in its
  // epilogue, while the values are in registers, rather than a reduction
  // kernel reading them back from memory.
  bool sums_conv_positions(ValueId v, const Node& n, const Kernel* K) const {
    if (!o_.conv_reductions || !K || K->kind != KernelKind::conv) return false;
    if ((n.op != Op::sum && n.op != Op::mean) || n.type.dtype != DType::f32) return false;
    const ValueId x = n.inputs[0], b = summed_value(g_, v);
    if (kernel(b) < 0 || &s_.kernels[static_cast<size_t>(kernel(b))] != K || !g_.node(K->ops[0]).attr_bool("channels_last")) return false;
    if (library_width_conv(*K)) return false;  // the library's epilogue has no sums
    const Shape &sb = g_.type(b).shape, &sx = g_.type(x).shape;
    if (sb != K->space || sb.size() < 3 || sb.size() > 4 || sx.size() < 3 || sx.front() != sb.front() || sx.back() != sb.back()) return false;
    std::vector<int64_t> axes = n.attr_ints("axes");
    std::sort(axes.begin(), axes.end());
    for (size_t i = 0; i < axes.size(); ++i)
      if (axes[i] != static_cast<int64_t>(i) + 1) return false;
    return axes.size() == sx.size() - 2;
  }

  // Operand o of v (in kernel k), with base b, is computed in k: read where it is
  // computed, not from memory (a conv's sum reads its values so through a
  // reshape).
  bool computed_here(ValueId v, ValueId o, ValueId b, int k) const {
    if (kernel(b) != k) return false;
    return o == b || (conv_reduced_.count(v) && summed_value(g_, v) == b);
  }

  // Whether n reads such a sum: it is complete only when its kernel is.
  bool reads_conv_sums(const Node& n) const {
    for (ValueId o : n.inputs)
      if (conv_reduced_.count(o)) return true;
    return false;
  }

  void place(ValueId v) {
    const Node& n = g_.node(v);
    const Fuse fuse = n.def().fuse;
    if (fuse == Fuse::lower) throw Error(std::string("fusion: ") + n.def().name + " must be decomposed first (the driver lowers it)");
    if (fuse == Fuse::matmul) return (void)new_kernel(v, KernelKind::matmul, n.type.shape);
    if (fuse == Fuse::attention) return (void)new_kernel(v, KernelKind::attention, n.type.shape);
    if (fuse == Fuse::conv) return (void)new_kernel(v, is_pool(n.op) ? KernelKind::pool : KernelKind::conv, n.type.shape);
    bool direct = false;
    int k = latest_dependency(v, &direct);
    Kernel* K = k >= 0 ? &s_.kernels[static_cast<size_t>(k)] : nullptr;

    if (last_axis_reduction(n)) {
      const Shape& in = g_.type(n.inputs[0]).shape;
      Shape rows = in;
      rows.back() = Dim(1);
      bool join = o_.rowwise && K && direct &&
                  (K->kind == KernelKind::pointwise || K->kind == KernelKind::rowwise) && K->space == in &&
                  stores_lead(*K);
      if (join) {
        K->kind = KernelKind::rowwise;
        row_space_[static_cast<size_t>(k)] = {rows, Shape(in.begin(), in.end() - 1)};
        return add(k, v);
      }
      int nk = new_kernel(v, KernelKind::rowwise, in);
      row_space_[static_cast<size_t>(nk)] = {rows, Shape(in.begin(), in.end() - 1)};
      return;
    }
    if (fuse == Fuse::reduction && sums_conv_positions(v, n, K)) {
      conv_reduced_.insert(v);
      return add(k, v);
    }
    if (fuse == Fuse::reduction)
      return (void)new_kernel(v, KernelKind::reduction, g_.type(n.inputs[0]).shape);

    if (is_store(n.op)) {
      // A store joins the pointwise kernel that computes all of its data.
      bool all_in_k = K && K->kind == KernelKind::pointwise && o_.pointwise;
      for (size_t i = n.op == Op::kv_write ? 1 : 0; all_in_k && i < (n.op == Op::kv_write ? 2 : n.inputs.size()); ++i)
        all_in_k = kernel(n.inputs[i]) == k;
      if (all_in_k) return add(k, v);
      // New K/V rows that are a view of a matmul's output are written into the
      // cache by the matmul itself, as its epilogue store.
      if (n.op == Op::kv_write && K && K->kind == KernelKind::matmul && o_.epilogue) {
        ValueId rows = n.inputs[1], b = base(rows);
        if (b >= 0 && kernel(b) == k && numel(g_.type(rows).shape) == numel(g_.type(b).shape)) return add(k, v);
      }
      return (void)new_kernel(v, KernelKind::pointwise, n.op == Op::kv_write ? g_.type(n.inputs[1]).shape : n.type.shape);
    }

    // Elementwise (and gathers that are not free).
    if (K && direct && fuse == Fuse::pointwise) {
      bool fits = false;
      switch (K->kind) {
        case KernelKind::matmul:
        case KernelKind::conv:
        case KernelKind::pool:
        case KernelKind::attention:
          fits = o_.epilogue && K->space == n.type.shape && !feeds_only_reductions(v) && !reads_conv_sums(n);
          if (fits && K->kind == KernelKind::conv && library_width_conv(*K)) fits = library_epilogue_op(*K, n);
          break;
        case KernelKind::pointwise: fits = o_.pointwise && K->space == n.type.shape; break;
        case KernelKind::rowwise: {
          const auto& rs = row_space_[static_cast<size_t>(k)];
          fits = o_.rowwise && (K->space == n.type.shape || rs.keep == n.type.shape || rs.drop == n.type.shape);
          break;
        }
        case KernelKind::reduction: break;
      }
      if (fits) return add(k, v);
    }
    new_kernel(v, KernelKind::pointwise, n.type.shape);
  }

  // The kernels each kernel reads from (through any free values), and those
  // it reads through a view.
  std::set<int> deps_of(int k, std::set<int>* via_view) const {
    std::set<int> d;
    for (ValueId v : s_.kernels[static_cast<size_t>(k)].ops) {
      const Node& n = g_.node(v);
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (!reads_operand(n, v, i)) continue;
        ValueId b = base(n.inputs[i]);
        if (b < 0 || kernel(b) < 0 || kernel(b) == k) continue;
        d.insert(kernel(b));
        if (b != n.inputs[i] || (n.def().fuse == Fuse::gather && i == 0)) via_view->insert(kernel(b));  // random access
      }
    }
    return d;
  }

  // A rowwise kernel runs its stores before its row loop, so they must come
  // first (their data is then all from outside).
  bool stores_lead(const Kernel& K) const {
    bool seen_compute = false;
    for (ValueId v : K.ops) {
      if (!is_store(g_.node(v).op)) seen_compute = true;
      else if (seen_compute) return false;
    }
    return true;
  }

  bool store_only(const Kernel& K) const {
    for (ValueId v : K.ops)
      if (!is_store(g_.node(v).op)) return false;
    return true;
  }

  // Pointwise kernels over one iteration space merge, as if each producer
  // were inlined into its consumers: kernel j folds into an earlier kernel i
  // when j reads i's results, or some later kernel reads both (they are parts
  // of one expression, like the two halves of RoPE), or, with the horizontal
  // rule, whenever they are independent. A kernel of stores folds into the
  // kernel computing all their data. Everything j needs besides i must come
  // before i, so merging never creates a cycle.
  void merge_pointwise() {
    auto& ks = s_.kernels;
    bool changed = true;
    while (changed) {
      changed = false;
      std::vector<std::set<int>> deps(ks.size()), via_view(ks.size());
      std::vector<std::set<int>> readers(ks.size());
      for (size_t k = 0; k < ks.size(); ++k) {
        if (ks[k].ops.empty()) continue;
        deps[k] = deps_of(static_cast<int>(k), &via_view[k]);
        for (int d : deps[k]) readers[static_cast<size_t>(d)].insert(static_cast<int>(k));
      }
      for (size_t j = 1; j < ks.size() && !changed; ++j) {
        if (ks[j].ops.empty() || ks[j].kind != KernelKind::pointwise) continue;
        bool stores = store_only(ks[j]);
        for (size_t ii = j; ii-- > 0 && !changed;) {
          const Kernel& I = ks[ii];
          int i = static_cast<int>(ii);
          if (I.ops.empty() || I.kind != KernelKind::pointwise) continue;
          bool before = true;
          for (int d : deps[j]) before &= d < i || d == i;
          if (!before || via_view[j].count(i)) continue;  // j would read i's results through a view
          bool reads_i = deps[j].count(i) > 0;
          bool related;
          if (stores) {
            related = reads_i && deps[j].size() == 1;
          } else {
            if (I.space != ks[j].space) continue;
            bool common = false;
            for (int r : readers[j]) common |= readers[ii].count(r) > 0;
            related = reads_i || common || o_.horizontal;
          }
          if (!related) continue;
          for (ValueId v : ks[j].ops) add(i, v);
          ks[j].ops.clear();
          changed = true;
        }
      }
    }
    // Drop emptied kernels and renumber.
    std::vector<int> renum(ks.size(), -1);
    std::vector<Kernel> kept;
    for (size_t i = 0; i < ks.size(); ++i) {
      if (ks[i].ops.empty()) continue;
      renum[i] = static_cast<int>(kept.size());
      kept.push_back(std::move(ks[i]));
    }
    ks = std::move(kept);
    for (auto& k : s_.kernel_of)
      if (k >= 0) k = renum[static_cast<size_t>(k)];
  }

  // Donation d, when its output's kernel can write it into the input safely
  // and every other reader of the input can run first.
  bool honor(const Donation& d) {
    const auto& outs = g_.outputs();
    if (d.output >= outs.size())
      throw Error("donate: " + g_.name() + " has " + std::to_string(outs.size()) + " outputs, not " + std::to_string(d.output + 1));
    ValueId b = g_.find(d.input);
    if (b < 0 || g_.node(b).op != Op::input) throw Error("donate: '" + d.input + "' is not an input of " + g_.name());
    ValueId v = outs[d.output];
    if (g_.type(v) != g_.type(b))
      throw Error("donate: output " + std::to_string(d.output) + " is " + g_.type(v).str() + ", input '" + d.input + "' is " +
                  g_.type(b).str());
    auto decline = [&](const std::string& why) {
      if (log_enabled("fusion"))
        std::fprintf(stderr, "[fusion] donation of '%s' to output %zu not used: %s\n", d.input.c_str(), d.output, why.c_str());
      return false;
    };
    int k = kernel(v);
    if (k < 0 || base(v) != v) return decline("the output is not computed by a kernel (an input, a constant or a view)");
    if (s_.writes_in_place(v)) return decline("the output is already written in place");
    for (ValueId t : s_.in_place)
      if (t == b) return decline("the input already holds another output");
    for (ValueId o : outs)
      if (base(o) == b) return decline("the input is itself returned");
    if (!overwrites_safely(g_, s_.kernels[static_cast<size_t>(k)], v, b))
      return decline(std::string("its ") + std::string(kernel_kind_name(s_.kernels[static_cast<size_t>(k)].kind)) +
                     " kernel does not read the input only where it writes");
    s_.in_place[static_cast<size_t>(v)] = b;
    if (!acyclic(kernel_dependencies(g_, s_))) {
      s_.in_place[static_cast<size_t>(v)] = -1;
      return decline("a kernel reading the input depends on the output");
    }
    if (log_enabled("fusion")) std::fprintf(stderr, "[fusion] output %zu written into input '%s' (donated)\n", d.output, d.input.c_str());
    return true;
  }

  static bool acyclic(const std::vector<std::vector<int>>& deps) { return topological_order(deps).size() == deps.size(); }

  // Kernels in an order that keeps every dependency (donations add some),
  // as close to the current one as it can: the first ready kernel each time.
  static std::vector<int> topological_order(const std::vector<std::vector<int>>& deps) {
    std::vector<int> waiting(deps.size(), 0), order;
    std::vector<std::vector<int>> users(deps.size());
    for (size_t k = 0; k < deps.size(); ++k)
      for (int d : deps[k]) ++waiting[k], users[static_cast<size_t>(d)].push_back(static_cast<int>(k));
    std::set<int> ready;
    for (size_t k = 0; k < deps.size(); ++k)
      if (!waiting[k]) ready.insert(static_cast<int>(k));
    while (!ready.empty()) {
      int k = *ready.begin();
      ready.erase(ready.begin());
      order.push_back(k);
      for (int u : users[static_cast<size_t>(k)])
        if (--waiting[static_cast<size_t>(u)] == 0) ready.insert(u);
    }
    return order;
  }

  void order_kernels() {
    std::vector<int> order = topological_order(kernel_dependencies(g_, s_));
    std::vector<Kernel> ks;
    for (int k : order) {
      for (ValueId v : s_.kernels[static_cast<size_t>(k)].ops) s_.kernel_of[static_cast<size_t>(v)] = static_cast<int>(ks.size());
      ks.push_back(std::move(s_.kernels[static_cast<size_t>(k)]));
    }
    s_.kernels = std::move(ks);
  }

  // kv_write storing rows its own kernel computed, read through a view: the
  // kernel writes them straight into the cache, nothing is re-read.
  bool epilogue_store(const Node& n, size_t operand, int k) const {
    if (n.op != Op::kv_write || operand != 1) return false;
    ValueId b = base(n.inputs[1]);
    return b >= 0 && kernel(b) == k;
  }

  // Inputs, outputs, bytes and flops of every kernel.
  void account() {
    std::vector<bool> written(g_.size(), false);
    for (ValueId o : g_.outputs())
      if (ValueId b = base(o); b >= 0 && kernel(b) >= 0) written[static_cast<size_t>(b)] = true;
    for (size_t k = 0; k < s_.kernels.size(); ++k) {
      for (ValueId v : s_.kernels[k].ops) {
        const Node& n = g_.node(v);
        for (size_t i = 0; i < n.inputs.size(); ++i) {
          if (!reads_operand(n, v, i)) continue;
          ValueId o = n.inputs[i];
          ValueId b = base(o);
          if (b >= 0 && kernel(b) >= 0 && !computed_here(v, o, b, static_cast<int>(k)) && !epilogue_store(n, i, static_cast<int>(k)))
            written[static_cast<size_t>(b)] = true;
        }
      }
    }
    for (size_t k = 0; k < s_.kernels.size(); ++k) {
      Kernel& K = s_.kernels[k];
      // Bytes touched per base buffer: the views read of it add up (two
      // halves of a tensor are all of it), up to the buffer's size.
      std::map<ValueId, int64_t> reads;
      std::set<ValueId> seen;
      for (ValueId v : K.ops) {
        const Node& n = g_.node(v);
        K.flops += counts_.flops(g_, n);
        for (size_t i = 0; i < n.inputs.size(); ++i) {
          if (!reads_operand(n, v, i)) continue;
          ValueId o = n.inputs[i];
          ValueId b = base(o);
          if (b < 0) continue;
          if (computed_here(v, o, b, static_cast<int>(k)) || epilogue_store(n, i, static_cast<int>(k))) continue;
          if (!seen.insert(o).second) continue;
          int64_t& r = reads[b];
          r = std::min(r + counts_.elems(g_.type(o)), counts_.elems(g_.type(b)));
        }
        if (written[static_cast<size_t>(v)]) {
          K.outputs.push_back(v);
          K.bytes_written += n.op == Op::kv_write && s_.writes_in_place(v) ? counts_.bytes(g_.type(n.inputs[1])) : counts_.bytes(n.type);
        }
      }
      for (const auto& [b, r] : reads) {
        K.inputs.push_back(b);
        K.bytes_read += r * dtype_size(g_.type(b).dtype);
      }
    }
  }

  struct RowSpace {
    Shape keep, drop;  // the per-row result with and without keepdim
  };

  const Graph& g_;
  FusionOptions o_;
  Counts counts_;
  std::vector<bool> free_;
  std::vector<std::vector<ValueId>> users_;
  Schedule s_;
  std::vector<RowSpace> row_space_;
  std::set<ValueId> conv_reduced_;  // sums_conv_positions: joined their conv's kernel
};

}  // namespace

ValueId base_buffer(const Graph& g, ValueId v) { return base_of(g, free_values(g), v); }


Schedule fuse(const Graph& g, const FusionOptions& o, const std::vector<Donation>& donate) { return Partitioner(g, o).run(donate); }

}  // namespace tj
