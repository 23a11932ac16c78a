#include "codegen/value_reader.h"

#include <map>

#include "tensorjit/error.h"

namespace tj::codegen {

ValueReader::ValueReader(const Graph& g, const Schedule& s, const SymEnv& hint)
    : g_(g), s_(s), in_mem_(g.size(), false), hint_(size_hint(g, hint)) {
  for (const Node& n : g.nodes()) (void)check_dtype(n.type.dtype);
  out_.symbols = size_symbols(g);
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op == Op::input || n.op == Op::param || (n.op == Op::constant && n.const_data()->size() > 1)) in_mem_[i] = true;
  }
  for (const Kernel& k : s.kernels) {
    for (ValueId v : k.outputs) in_mem_[static_cast<size_t>(v)] = true;
    for (ValueId v : k.ops)
      if (s.writes_in_place(v)) in_mem_[static_cast<size_t>(v)] = true;  // it is its cache
  }
}

// Value v's data as the function's local pointer p<v>, declared at its top
// (see pointers()): loaded from the table once, not in every loop.
std::string ValueReader::ptr(ValueId v) {
  used_.insert(v);
  return "p" + std::to_string(v);
}

DType ValueReader::check_dtype(DType t) {
  (void)ctype(t);
  return t;
}

// A pointwise op's value at `idx` (its own output index): its row's C
// expression over its operands' values (src/ir/ops/).
std::string ValueReader::elementwise(const Node& n, const Idx& idx) {
  const OpDef& def = n.def();
  const CExprFn form = expression(def);
  if (!form) throw Error(std::string("code generation: ") + def.name + " is not pointwise");
  CExpr e;
  for (ValueId in : n.inputs) e.a.push_back(load(in, broadcast(in, n.type.shape, idx)));
  e.T = compute_ctype(n.type.dtype);
  e.S = n.inputs.empty() ? e.T : CT(n.inputs[0]);
  e.integer = is_int(n.type.dtype);
  std::vector<double> k = scalar_attrs(def, n.attrs);
  e.k = k.data();
  if (n.op == Op::cast) {
    const DType from = g_.type(n.inputs[0]).dtype, to = n.type.dtype;
    const bool saturate = n.attr_bool("saturate");
    // Narrow floats from f64: through float rounded to odd, so rounded once.
    if (is_narrow_float(to) && from == DType::f64) return rounded("tj_odd(" + e.a[0] + ")", to, saturate);
    if (is_narrow_float(to)) return rounded("(float)(" + e.a[0] + ")", to, saturate);
    // Floats to 4- and 2-bit integers: 0 out of range (round_to_dtype).
    if (is_float(from) && is_subbyte_int(to))
      return "tj_f2sub<" + ctype(to) + ">(" + e.a[0] + ", " + std::to_string(static_cast<int>(int_min(to))) + ", " +
             std::to_string(static_cast<int>(int_max(to))) + ")";
  }
  return rounded(form(e), n.type.dtype);
}

std::string ValueReader::elementwise_or_gather(const Node& n, const Idx& idx) {
  if (n.op == Op::gather) return load_gather(n, idx);
  return elementwise(n, idx);
}

void ValueReader::make_temp(ValueId v) {
  if (in_mem_[static_cast<size_t>(v)] || temp_.count(v)) return;
  temp_.insert(v);
  out_.temporaries.push_back(v);
  out_.temporary_kernel.push_back(current_kernel_);
  out_.temporary_sizes.push_back(count(shape(v)) * static_cast<int64_t>(dtype_size(g_.type(v).dtype)));
}

// Values of kernel k that others in it read from memory: through a view,
// or as a store's operand.
void ValueReader::plan_temporaries(const Kernel& K, int k) {
  current_kernel_ = k;
  for (ValueId v : K.ops) {
    const Node& n = g_.node(v);
    if (sums_in_epilogue(g_, K, v)) continue;  // read in the epilogue, through its reshape
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      ValueId o = n.inputs[i];
      // Walk to the first non-free value behind o.
      ValueId b = o;
      while (g_.node(b).def().category == OpCategory::view) b = g_.node(b).inputs[0];
      if (s_.kernel_of[static_cast<size_t>(b)] != k) continue;
      bool via_view = b != o;
      // A store reads its operands from memory: computed again there, one
      // could read an input that an output of its segment has overwritten
      // in place (a scatter_add's base computed from a buffer the segment
      // writes: overwrites_safely sees only direct reads).
      bool store_data = n.def().fuse == Fuse::store;
      if (via_view || store_data) make_temp(b);
    }
  }
  // Ops are emitted in segments: a store ends the loop nest before it (a
  // concat as rows starts one, with the ops it streams to). A value used in
  // a later segment than its own must be in memory.
  streamed_.clear();
  for (size_t i = 0; i < K.ops.size(); ++i) {
    const auto rows = concat_rows_streamed() ? concat_rows(K, i) : std::nullopt;
    if (!rows) continue;
    streamed_[i] = rows->end;
    // Read after the pass (by the store that ends it, or an op past that,
    // which may recompute an op of the pass from it): in memory.
    const std::set<ValueId> run(K.ops.begin() + static_cast<std::ptrdiff_t>(i), K.ops.begin() + static_cast<std::ptrdiff_t>(rows->end));
    for (size_t j = rows->end; j < K.ops.size(); ++j)
      for (ValueId o : g_.node(K.ops[j]).inputs)
        if (run.count(o)) make_temp(K.ops[i]);
  }
  if (K.kind != KernelKind::rowwise && K.kind != KernelKind::reduction) {
    std::map<ValueId, int> segment;
    int seg = 0;
    for (size_t i = 0; i < K.ops.size(); ++i) {
      const ValueId v = K.ops[i];
      const Node& n = g_.node(v);
      if (streamed_.count(i)) ++seg;
      for (ValueId o : n.inputs)
        if (auto it = segment.find(o); it != segment.end() && it->second != seg) make_temp(o);
      segment[v] = seg;
      if (n.def().fuse == Fuse::store && !streamed_.count(i)) ++seg;
    }
  }
  // Results written by a library call or a store loop live in memory.
  if (K.kind == KernelKind::matmul || K.kind == KernelKind::attention || K.kind == KernelKind::conv || K.kind == KernelKind::pool) make_temp(K.ops[0]);
  for (size_t i = 0; i < K.ops.size(); ++i)
    if (g_.node(K.ops[i]).def().fuse == Fuse::store && !streamed_.count(i)) make_temp(K.ops[i]);
}

std::optional<ValueReader::ConcatRows> ValueReader::concat_rows(const Kernel& K, size_t i) const {
  const ValueId v = K.ops[i];
  const Node& n = g_.node(v);
  const auto so = shape(v);
  const DType t = n.type.dtype;
  if (K.kind != KernelKind::pointwise || n.op != Op::concat || so.size() < 2 || static_cast<size_t>(n.attr_int("axis")) + 1 != so.size()) return std::nullopt;
  if (t != DType::f32 && t != DType::f64 && t != DType::i32 && t != DType::i64) return std::nullopt;  // read as stored
  for (ValueId in : n.inputs) {
    const auto st = strided(in);
    if (!st) return std::nullopt;
    const auto si = shape(in), cs = contiguous_strides(si);
    for (size_t d = 0; d < si.size(); ++d)
      if (si[d] != Dim(1) && st->strides[d] != cs[d]) return std::nullopt;
  }
  // The ops it streams to: every op up to the next store, each over its
  // space, none a gather nor reading the concat or another of them through
  // a view (at another index than the one being computed). Where they are
  // not all such, the concat is not streamed.
  size_t end = i + 1;
  while (end < K.ops.size() && g_.node(K.ops[end]).def().fuse != Fuse::store) ++end;
  if (end > i + 1 && so != K.space) return std::nullopt;
  const std::set<ValueId> run(K.ops.begin() + static_cast<std::ptrdiff_t>(i), K.ops.begin() + static_cast<std::ptrdiff_t>(end));
  for (size_t j = i + 1; j < end; ++j) {
    const Node& m = g_.node(K.ops[j]);
    if (m.type.shape != so || m.def().fuse == Fuse::gather) return std::nullopt;
    for (ValueId o : m.inputs) {
      ValueId b = o;
      while (g_.node(b).def().category == OpCategory::view) b = g_.node(b).inputs[0];
      if (b != o && run.count(b)) return std::nullopt;
    }
  }
  return ConcatRows{end};
}

std::vector<ValueReader::ConcatPart> ValueReader::concat_parts(ValueId v) const {
  const Node& n = g_.node(v);
  const size_t axis = static_cast<size_t>(n.attr_int("axis"));
  std::vector<ConcatPart> r;
  Dim at = 0;
  for (ValueId in : n.inputs) {
    auto si = shape(in);
    ConcatPart c{in, loop_vars(si.size(), "c"), {}};
    c.into = c.at;
    c.into[axis] = "(" + c.at[axis] + "+" + C(at) + ")";
    r.push_back(std::move(c));
    at = at + si[axis];
  }
  return r;
}

// How this backend accumulates each Fuse::reduction op (sum and mean add,
// amax takes the maximum, prod multiplies; mean divides after): a kernel
// strategy, by op.
ValueReader::Accumulator ValueReader::accumulator(const Node& n) {
  bool integer = is_int(n.type.dtype), max = n.op == Op::amax, prod = n.op == Op::prod;
  if (integer) return {"int64_t", max ? "INT64_MIN" : prod ? "1" : "0", true, max, prod};
  return {"double", max ? "-INFINITY" : prod ? "1" : "0", false, max, prod};
}

// The value of `x` at row position j: an in-kernel row, an in-kernel
// per-row scalar, or a load.
std::string ValueReader::row_value(ValueId x, const Idx& full, const Sizes& sp) {
  if (auto it = local_row_.find(x); it != local_row_.end()) return it->second + "[j]";
  if (auto it = local_.find(x); it != local_.end()) return it->second;
  return load(x, broadcast(x, sp, full));
}

// An elementwise op over the row, with in-kernel operands from registers/rows.
std::string ValueReader::with_rows(const Node& n, const Idx& full) {
  std::map<ValueId, std::string> saved = local_;
  for (ValueId in : n.inputs)
    if (auto it = local_row_.find(in); it != local_row_.end()) local_[in] = it->second + "[j]";
  std::string e = elementwise_or_gather(n, full);
  local_ = saved;
  return e;
}

// The placeholders of a row form at element j of the row `out`.
RowOperands ValueReader::row_operands(const Node& n, const std::string& out, const Idx& full, const Sizes& sp, const Dim& D) {
  RowOperands o;
  std::string* operand[] = {&o.x, &o.w, &o.b};
  for (size_t i = 0; i < n.inputs.size() && i < 3; ++i) *operand[i] = "(double)(" + row_value(n.inputs[i], full, sp) + ")";
  o.y = "(double)" + out + "[j]";
  o.D = "(double)" + C(D);
  if (attr_index(n.def(), "eps") >= 0) o.eps = literal(n.attr_float("eps"), DType::f64);
  return o;
}

ValueReader::Rows ValueReader::as_rows(ValueId x, const std::function<void(ValueId)>& copy) {
  auto st = strided(x);
  if (!st || st->strides.back() != Dim(1)) {
    copy(x);
    st = Strided{x, 0, contiguous_strides(shape(x))};
  }
  Rows r;
  r.p = "(" + ptr(st->base) + " + " + C(st->offset) + ")";
  // A dim of 1 broadcasts (a bias): stride 0.
  auto sx = shape(x);
  for (size_t d = 0; d < sx.size(); ++d) r.strides.push_back(sx[d] == Dim(1) ? std::string("0") : C(st->strides[d]));
  return r;
}

}  // namespace tj::codegen
