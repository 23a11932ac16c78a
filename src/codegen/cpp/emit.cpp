#include "codegen/cpp/emitter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "codegen/cpp/build.h"
#include "tensorjit/error.h"

namespace tj::cpp {

std::string ctype(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::i64: return "int64_t";
    case DType::i32: return "int32_t";
    case DType::boolean: return "uint8_t";
    case DType::i8: return "int8_t";
    case DType::u8: return "char8_t";  // unsigned, 8 bits, and a type of its own: uint8_t is bool here
    case DType::i16: return "int16_t";
    case DType::u16: return "uint16_t";
    case DType::u32: return "uint32_t";
    case DType::u64: return "uint64_t";
    case DType::f16: return "tj_f16";
    case DType::bf16: return "tj_bf16";
    case DType::f8e4m3fn: case DType::f8e4m3fnuz: case DType::f8e5m2: case DType::f8e5m2fnuz: case DType::f8e8m0: case DType::f4e2m1:
      return "tj_mf<" + std::to_string(minifloat_format(t)) + ">";
    case DType::i4: case DType::i2: return "int8_t";
    case DType::u4: case DType::u2: return "char8_t";
  }
  throw Error("code generation does not support " + std::string(dtype_name(t)) + " yet");
}

std::string compute_ctype(DType t) { return is_narrow_float(t) ? "float" : ctype(t); }

std::string rounded(const std::string& expr, DType t, bool saturate) {
  switch (t) {
    case DType::bf16: return "tj_rbf16(" + expr + ")";
    case DType::f16: return "tj_rf16(" + expr + ")";
    case DType::i4: case DType::u4: case DType::i2: case DType::u2:
      return "tj_wrapbits<" + ctype(t) + ", " + (t == DType::i4 || t == DType::u4 ? "4" : "2") + ">(" + expr + ")";
    default:
      if (!is_minifloat(t)) return expr;
      return "tj_mini_round<" + std::to_string(minifloat_format(t)) + ">(" + expr + (saturate ? ", true)" : ", false)");
  }
}

std::string literal(double v, DType t) {
  CExpr e;
  e.T = compute_ctype(t);
  e.integer = !is_float(t);
  return e.lit(v);
}

Sizes contiguous_strides(const Sizes& s) {
  Sizes st(s.size());
  Dim acc(1);
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc = acc * s[i];
  }
  return st;
}

Dim count(const Sizes& s) {
  Dim n(1);
  for (const Dim& d : s) n = n * d;
  return n;
}

// a / b, exact (sizes divide evenly where the emitter divides them).
Dim div(const Dim& a, const Dim& b) {
  if (b == Dim(0)) return Dim(0);
  if (auto q = a.div_exact(b)) return *q;
  if (a.is_const() && b.is_const()) return Dim(a.value() / b.value());
  throw Error("code generation: cannot divide " + a.str() + " by " + b.str());
}

// The C name of size symbol `s`.
std::string sym_name(const std::string& s) {
  std::string r = "tj_sym_";
  for (char c : s) r += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return r;
}

// A size as a C expression ("128LL", "(2LL*tj_sym_S+1LL)").
std::string C(const Dim& d) {
  if (d.is_const()) return std::to_string(d.value()) + "LL";
  return "(" + d.c_expr(sym_name) + ")";
}

// The index of flat position `f` in an array of `shape`: the inverse of
// flat(). An array with a zero extent has no element to index (the loop over
// it never runs), so it gets zeros rather than a division by zero that the
// compiler would warn about.
Idx unflat(const std::string& f, const Sizes& shape) {
  Idx r(shape.size(), "0");
  for (const Dim& d : shape)
    if (d == Dim(0)) return r;
  auto cs = contiguous_strides(shape);
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != Dim(1)) r[d] = "((" + f + ")/" + C(cs[d]) + "%" + C(shape[d]) + ")";
  return r;
}

std::string flat(const Idx& idx, const Sizes& shape) {
  auto st = contiguous_strides(shape);
  std::string e;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (shape[d] == Dim(1) || idx[d] == "0") continue;
    std::string term = st[d] == Dim(1) ? "(" + idx[d] + ")" : "(" + idx[d] + ")*" + C(st[d]);
    e += (e.empty() ? "" : " + ") + term;
  }
  return e.empty() ? "0" : e;
}

Idx loop_vars(size_t rank, const std::string& prefix) {
  Idx v;
  for (size_t d = 0; d < rank; ++d) v.push_back(prefix + std::to_string(d));
  return v;
}

EmittedProgram Emitter::run() {
  for (size_t k = 0; k < s_.kernels.size(); ++k) emit_kernel(static_cast<int>(k));
  // Small GEMVs and attentions split over the pool only when the program
  // has enough of them (a decode step): one alone is not worth the wake-ups.
  out_.splits_small_kernels = team_work_total_ >= kTeamElements;
  // Each kernel and output function may go into a translation unit of its
  // own (build.h): what every unit needs comes before the first mark.
  out_.source = prelude() + (reads_narrow_weights_ ? narrow_weight_helpers() : "") + op_helpers() + "extern \"C\" {\n\n" + "static const bool tj_team = " + (out_.splits_small_kernels ? "true" : "false") +
                ";\n\n" + kUnitMark + "int tj_status = 0;\n\n" + out_.source;
  for (size_t o = 0; o < g_.outputs().size(); ++o) emit_output(o);
  emit_index_checks();
  out_.source += std::string(kUnitMark) + "}  // extern \"C\"\n";
  return std::move(out_);
}

// The C++ that the expressions of the graph's ops need (their rows' c_helpers), once each.
std::string Emitter::op_helpers() const {
  std::vector<bool> seen(static_cast<size_t>(Op::kNumOps), false);
  std::string h;
  for (const Node& n : g_.nodes()) {
    if (seen[static_cast<size_t>(n.op)] || !n.def().c_helpers) continue;
    seen[static_cast<size_t>(n.op)] = true;
    h += "// for " + std::string(n.def().name) + "\n" + n.def().c_helpers + "\n";
  }
  return h;
}

DType Emitter::check_dtype(DType t) {
  (void)ctype(t);
  return t;
}

// Value v's data as the function's local pointer p<v>, declared at its top
// (see pointers()): loaded from the table once, not in every loop.
std::string Emitter::ptr(ValueId v) {
  used_.insert(v);
  return "p" + std::to_string(v);
}

std::string Emitter::slot(tj_table_slot s) const {
  static constexpr const char* kNames[tj_slots] = {"tj_slot_scratch", "tj_slot_runtime", "tj_slot_sizes", "tj_slot_split_small"};
  return "t[" + std::to_string(g_.size()) + " + " + kNames[s] + "]";
}

// Declarations of the pointers a function body used; resets the set.
std::string Emitter::pointers() {
  std::string d;
  for (ValueId v : used_) d += "  " + T(v) + "* const p" + std::to_string(v) + " = (" + T(v) + "*)t[" + std::to_string(v) + "];\n";
  used_.clear();
  for (size_t k = 0; k < out_.symbols.size(); ++k)  // sizes: the tj_slot_sizes slot holds their values
    d += "  const int64_t " + sym_name(out_.symbols[k]) + " = ((const int64_t*)" + slot(tj_slot_sizes) + ")[" +
         std::to_string(k) + "];\n";
  return d;
}

// ---- elementwise ops (values read through codegen/cpp/views.cpp) ----------

// A pointwise op's value at `idx` (its own output index): its row's C
// expression over its operands' values (src/ir/ops/).
std::string Emitter::elementwise(const Node& n, const Idx& idx) {
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

// ---- loops ---------------------------------------------------------------
// A loop nest over `sh`; `columns` narrows the innermost loop to this
// thread's share [n0, n1) of a kernel split over columns.
std::string Emitter::loops(const Sizes& sh, const Idx& vars, const std::string& body, bool allow_parallel,
                  bool simd, bool columns) {
  if (sh.empty()) return "{\n" + body + "}\n";
  std::string open, close;
  // Split over the outermost dim of more than one element ([1,128,5632]:
  // the 128 rows); dims of one outside it are loops of one iteration.
  size_t split = 0;
  while (split + 1 < sh.size() && hint(sh[split]) <= 1) ++split;
  bool par = allow_parallel && !columns && hint(count(sh)) >= kParallelElements && hint(sh[split]) > 1;
  for (size_t d = 0; d < sh.size(); ++d) {
    bool innermost = d + 1 == sh.size();
    if (d == split && par) {
      open += open_parallel_loop(vars[d], C(sh[d]), innermost && simd);
      close = close_parallel_loop() + close;
      continue;
    }
    if (innermost && simd) open += "#pragma omp simd\n";
    std::string lo = innermost && columns ? "n0" : "0", hi = innermost && columns ? "n1" : C(sh[d]);
    open += "for (int64_t " + vars[d] + " = " + lo + "; " + vars[d] + " < " + hi + "; ++" + vars[d] + ") {\n";
    close = "}\n" + close;
  }
  return open + body + close;
}

std::string Emitter::open_parallel(const std::string& parts) const {
  return "tj_parallel(" + pool() + ", " + parts + ", [&](int64_t tj_part, int64_t tj_parts, int tj_thread) {\n(void)tj_part; (void)tj_parts; (void)tj_thread;\n";
}

// `for (var = 0; var < n; ++var) {` split into parts over the pool; the
// body and "}" follow, then close_parallel_loop().
std::string Emitter::open_parallel_loop(const std::string& var, const std::string& n, bool simd) const {
  std::string c = open_parallel("std::min<int64_t>(" + n + ", " + split_parts() + ")");
  c += "const int64_t tj_lo = " + n + "*tj_part/tj_parts, tj_hi = " + n + "*(tj_part + 1)/tj_parts;\n";
  c += simd ? "#pragma omp simd\n" : "";
  return c + "for (int64_t " + var + " = tj_lo; " + var + " < tj_hi; ++" + var + ") {\n";
}

void Emitter::make_temp(ValueId v) {
  if (in_mem_[static_cast<size_t>(v)] || temp_.count(v)) return;
  temp_.insert(v);
  out_.temporaries.push_back(v);
  out_.temporary_kernel.push_back(current_kernel_);
  out_.temporary_sizes.push_back(count(shape(v)) * static_cast<int64_t>(dtype_size(g_.type(v).dtype)));
}

// Values of kernel k that others in it read from memory: through a view,
// or as a store's data.
void Emitter::plan_temporaries(const Kernel& K, int k) {
  current_kernel_ = k;
  for (ValueId v : K.ops) {
    const Node& n = g_.node(v);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      ValueId o = n.inputs[i];
      // Walk to the first non-free value behind o.
      ValueId b = o;
      while (g_.node(b).def().category == OpCategory::view) b = g_.node(b).inputs[0];
      if (s_.kernel_of[static_cast<size_t>(b)] != k) continue;
      bool via_view = b != o;
      bool store_data = n.op == Op::concat || (n.op == Op::kv_write && i == 1);
      if (via_view || store_data) make_temp(b);
    }
  }
  // Ops are emitted in segments: a store ends the loop nest before it.
  // A value used in a later segment than its own must be in memory.
  if (K.kind != KernelKind::rowwise && K.kind != KernelKind::reduction) {
    std::map<ValueId, int> segment;
    int seg = 0;
    for (ValueId v : K.ops) {
      const Node& n = g_.node(v);
      for (ValueId o : n.inputs)
        if (auto it = segment.find(o); it != segment.end() && it->second != seg) make_temp(o);
      segment[v] = seg;
      if (n.def().fuse == Fuse::store) ++seg;
    }
  }
  // Results written by a library call or a store loop live in memory.
  if (K.kind == KernelKind::matmul || K.kind == KernelKind::attention) make_temp(K.ops[0]);
  for (ValueId v : K.ops)
    if (g_.node(v).def().fuse == Fuse::store) make_temp(v);
}

// ---- kernels -------------------------------------------------------------
std::string Emitter::name_of(int k) const {
  const Kernel& K = s_.kernels[static_cast<size_t>(k)];
  std::string n = "k" + std::to_string(k) + "_" + std::string(kernel_kind_name(K.kind));
  std::set<std::string> seen;
  for (ValueId v : K.ops) {
    std::string op = g_.node(v).def().name;
    if (seen.insert(op).second && seen.size() <= 4) n += "_" + op;
  }
  return n;
}

void Emitter::emit_kernel(int k) {
  knobs_ = {};
  alternatives_.clear();
  const std::string name = name_of(k);
  const size_t temps = out_.temporaries.size();
  const int64_t team = emit_function(k, name);
  team_work_total_ += team;
  out_.kernel_symbols.push_back(name);
  // Not a kernel that writes in place (measuring runs it over and over), nor
  // one of a team: whether it splits is measured at run time
  // (runtime/split_choice.h), and its candidates would be timed in one way
  // and run in the other.
  bool in_place = false;
  for (ValueId v : s_.kernels[static_cast<size_t>(k)].ops) in_place |= s_.writes_in_place(v) || g_.node(v).def().fuse == Fuse::store;
  if (!tune_ || alternatives_.size() < 2 || in_place || team > 0) return;
  // Each further candidate: the same temporaries (else it is left out).
  const std::vector<ValueId> own(out_.temporaries.begin() + static_cast<std::ptrdiff_t>(temps), out_.temporaries.end());
  const std::vector<Knobs> all = alternatives_;
  EmittedProgram::Tunable t{k, tuning_signature_, {all[0].label}, {name}};
  for (size_t i = 1; i < all.size(); ++i) {
    const size_t at = out_.source.size();
    knobs_ = all[i];
    const std::string variant = name + "__t" + std::to_string(i);
    emit_function(k, variant);
    const size_t from = std::min(out_.temporaries.size(), own.size() + temps);
    const std::vector<ValueId> again(out_.temporaries.begin() + static_cast<std::ptrdiff_t>(from), out_.temporaries.end());
    out_.temporaries.resize(temps + own.size());
    out_.temporary_kernel.resize(temps + own.size());
    out_.temporary_sizes.resize(temps + own.size());
    if (again != own) {
      out_.source.resize(at);
      continue;
    }
    t.labels.push_back(all[i].label);
    t.symbols.push_back(variant);
  }
  knobs_ = {};
  if (t.symbols.size() > 1) out_.tunable.push_back(std::move(t));
}

int64_t Emitter::emit_function(int k, const std::string& name) {
  const Kernel& K = s_.kernels[static_cast<size_t>(k)];
  temp_.clear();
  plan_temporaries(K, k);
  std::string body;
  team_work_ = 0;
  used_.clear();
  switch (K.kind) {
    case KernelKind::pointwise: body = pointwise_body(K, 0); break;
    case KernelKind::matmul: body = matmul_body(K); break;
    case KernelKind::attention: body = attention_body(K); break;
    case KernelKind::rowwise: body = rowwise_body(K); break;
    case KernelKind::reduction: body = reduction_body(K); break;
  }
  out_.source += std::string(kUnitMark) + "// kernel " + std::to_string(k) + ": " + std::string(kernel_kind_name(K.kind)) + " over " +
                 shape_str(K.space) + (knobs_.label.empty() ? "" : " (candidate: " + knobs_.label + ")") + "\n";
  // Share `id` of `nt`, split over the pool when the program has tj_team
  // and the runtime says so (the tj_slot_split_small slot, measured per program); alone, all of it. One part per thread: these kernels take a few
  // microseconds, where each further part's claim costs more than it
  // balances (tiny decode 11.6-14.0 us against 15.7-17.6 with 4 per thread).
  if (team_work_ > 0) {
    std::string decl = pointers();
    out_.source += "void " + name + "(void** t) {\n" + decl + "  const auto part = [&](int64_t tj_part, int64_t tj_parts, int tj_thread) {\n" +
                   "    const int id = (int)tj_part, nt = (int)tj_parts; (void)tj_thread;\n" + body + "  };\n" +
                   "  if (tj_team && *(const int*)" + slot(tj_slot_split_small) + ") tj_parallel(" + pool() + ", tj_threads(" + pool() +
                   "), part);\n  else part(0, 1, 0);\n}\n\n";
  } else {
    out_.source += "void " + name + "(void** t) {\n" + pointers() + body + "}\n\n";
  }
  temp_.clear();  // temporaries are only visible to their kernel
  return team_work_;
}

std::string Emitter::elementwise_or_gather(const Node& n, const Idx& idx) {
  if (n.op == Op::gather) return load_gather(n, idx);
  return elementwise(n, idx);
}

// Per-thread scratch of `bytes` for the current kernel: its stride in
// generated code (rounded up to 64 bytes); the executable allots every
// thread the most any kernel needs.
std::string Emitter::scratch(const Dim& bytes) {
  out_.scratch_sizes.push_back(bytes);
  return bytes.is_const() ? C(Dim((bytes.value() + 63) / 64 * 64)) : "((" + C(bytes) + "+63LL)/64LL*64LL)";
}

void Emitter::make_temp_copy(ValueId x, std::string* code) {
  // Materialize a view into a temporary (its own value slot).
  make_temp(x);
  auto sx = shape(x);
  Idx iv = loop_vars(sx.size(), "m");
  temp_.erase(x);  // read through the view while copying
  std::string body = "  " + ptr(x) + "[" + flat(iv, sx) + "] = " + load(x, iv) + ";\n";
  temp_.insert(x);
  *code += loops(sx, iv, body);
}

void Emitter::emit_output(size_t i) {
  ValueId o = g_.outputs()[i];
  auto so = shape(o);
  Idx iv = loop_vars(so.size(), "o");
  std::string name = "tj_output_" + std::to_string(i);
  local_.clear();
  used_.clear();
  std::string body = loops(so, iv, "  ((" + T(o) + "*)dst)[" + flat(iv, so) + "] = " + load(o, iv) + ";\n");
  out_.source += std::string(kUnitMark) + "void " + name + "(void** t, void* dst) {\n" + pointers() + body + "}\n\n";
  out_.output_symbols.push_back(name);
}

// A free gather (indices computed from inputs alone) is read only where a
// consumer reads it, and a consumer may read none of it (an empty slice
// of it): every index is checked once per call, before the kernels, as the
// interpreter checks it (unless the gather has no element at all).
void Emitter::emit_index_checks() {
  std::string body;
  local_.clear();
  used_.clear();
  for (size_t v = 0; v < g_.size(); ++v) {
    const Node& n = g_.nodes()[v];
    if (n.op != Op::gather || s_.kernel_of[v] >= 0) continue;
    ValueId ind = n.inputs[1];
    auto si = shape(ind);
    Idx iv = loop_vars(si.size(), "q");
    Dim len = shape(n.inputs[0])[static_cast<size_t>(n.attr_int("axis"))];
    std::string check = "  (void)tj_index((int64_t)(" + load(ind, iv) + "), " + C(len) + ");\n";
    body += "if (" + C(count(shape(static_cast<ValueId>(v)))) + " > 0) " + loops(si, iv, check, false, false);
  }
  if (body.empty()) return;
  out_.source += std::string(kUnitMark) + "void tj_check_indices(void** t) {\n" + pointers() + body + "}\n\n";
  out_.check_symbol = "tj_check_indices";
}

}  // namespace tj::cpp

namespace tj {

EmittedProgram emit_cpp(const Graph& g, const Schedule& s, const SymEnv& hint, bool tune) { return cpp::Emitter(g, s, hint, tune).run(); }

// Each kernel's temporaries from offset 0 (kernels run one at a time), but
// a value that is a temporary of several kernels (a view two products both
// copy) has one table slot: it gets a range of its own below every
// kernel's, the same in each.
TemporaryLayout lay_out_temporaries(const EmittedProgram& p, const SymEnv& sizes) {
  TemporaryLayout l;
  auto rounded = [&](size_t i) { return (p.temporary_sizes[i].eval(sizes) + 63) / 64 * 64; };
  std::map<ValueId, int> kernels_of;
  for (size_t i = 0; i < p.temporaries.size(); ++i) ++kernels_of[p.temporaries[i]];
  std::map<ValueId, int64_t> shared;
  int64_t base = 0;
  for (size_t i = 0; i < p.temporaries.size(); ++i)
    if (kernels_of[p.temporaries[i]] > 1 && shared.emplace(p.temporaries[i], base).second) base += rounded(i);
  int kernel = -1;
  int64_t cursor = base;
  l.bytes = base;
  for (size_t i = 0; i < p.temporaries.size(); ++i) {
    if (auto it = shared.find(p.temporaries[i]); it != shared.end()) {
      l.offsets.push_back(it->second);
      continue;
    }
    if (p.temporary_kernel[i] != kernel) kernel = p.temporary_kernel[i], cursor = base;
    l.offsets.push_back(cursor);
    cursor += rounded(i);
    l.bytes = std::max(l.bytes, cursor);
  }
  return l;
}

int64_t scratch_bytes_per_thread(const EmittedProgram& p, const SymEnv& sizes) {
  int64_t b = 0;
  for (const Dim& d : p.scratch_sizes) b = std::max(b, (d.eval(sizes) + 63) / 64 * 64);
  return b;
}

}  // namespace tj
