#include "codegen/cpp/emitter.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "codegen/cpp/build.h"
#include "tensorjit/error.h"

namespace tj::cpp {

namespace {

// The line every part's lambda starts with (open_parallel, a team's `part`).
const std::string kPartLambda = "[&](int64_t tj_part, int64_t tj_parts, int tj_thread) {\n";

}  // namespace

EmittedProgram Emitter::run() {
  for (size_t k = 0; k < s_.kernels.size(); ++k) emit_kernel(static_cast<int>(k));
  unlift();
  // Small GEMVs and attentions split over the pool only when the program
  // has enough of them (a decode step): one alone is not worth the wake-ups.
  out_.splits_small_kernels = team_work_total_ >= kTeamElements;
  // Each kernel and output function may go into a translation unit of its
  // own (build.h): what every unit needs comes before the first mark.
  out_.source = prelude() + (reads_narrow_weights_ ? narrow_weight_helpers() : "") + (uses_direct_conv_ ? direct_conv_helpers() : "") + (uses_pool_ ? pool_helpers() : "") + op_helpers() + "extern \"C\" {\n\n" + "static const bool tj_team = " + (out_.splits_small_kernels ? "true" : "false") +
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

std::string Emitter::slot(tj_table_slot s) const {
  static constexpr const char* kNames[tj_slots] = {"tj_slot_scratch", "tj_slot_runtime", "tj_slot_sizes", "tj_slot_split_small",
                                                    "tj_slot_library"};
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

std::string Emitter::pointers_through_slots(std::vector<ValueId>* slots) {
  std::string d;
  for (ValueId v : used_) {
    d += "  " + T(v) + "* const p" + std::to_string(v) + " = (" + T(v) + "*)t[tj_buf[" + std::to_string(slots->size()) + "]];\n";
    slots->push_back(v);
  }
  used_.clear();
  return d + pointers();  // the sizes
}

namespace {

// `code` with each name of a letter from "pvas" and digits (the emitter's
// names for values: pointers, locals, accumulators, sums) replaced by its
// rank of first appearance: equal for two kernels that compute alike on
// different values.
std::string positional_names(const std::string& code) {
  std::map<std::string, size_t, std::less<>> rank;
  std::string out;
  out.reserve(code.size());
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = 0; i < code.size();) {
    const bool starts = (i == 0 || !word(code[i - 1])) && std::strchr("pvas", code[i]) && code[i] != 0 && i + 1 < code.size() &&
                        std::isdigit(static_cast<unsigned char>(code[i + 1]));
    if (!starts) {
      out += code[i++];
      continue;
    }
    size_t j = i + 1;
    while (j < code.size() && std::isdigit(static_cast<unsigned char>(code[j]))) ++j;
    if (j < code.size() && word(code[j])) {  // part of a longer name
      out.append(code, i, j - i);
      i = j;
      continue;
    }
    auto [it, fresh] = rank.try_emplace(code.substr(i, j - i), rank.size());
    out += "@" + std::to_string(it->second);
    i = j;
  }
  return out;
}

}  // namespace

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
  return "tj_parallel(" + pool() + ", " + parts + ", " + kPartLambda + "(void)tj_part; (void)tj_parts; (void)tj_thread;\n";
}

// `for (var = 0; var < n; ++var) {` split into parts over the pool; the
// body and "}" follow, then close_parallel_loop().
std::string Emitter::open_parallel_loop(const std::string& var, const std::string& n, bool simd) const {
  std::string c = open_parallel("std::min<int64_t>(" + n + ", " + split_parts() + ")");
  c += "const int64_t tj_lo = " + n + "*tj_part/tj_parts, tj_hi = " + n + "*(tj_part + 1)/tj_parts;\n";
  c += simd ? "#pragma omp simd\n" : "";
  return c + "for (int64_t " + var + " = tj_lo; " + var + " < tj_hi; ++" + var + ") {\n";
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
      // and the function it emitted, if any: no later kernel may call it
      while (!lifted_bodies_.empty() && lifted_bodies_.back().begin >= at) lifted_bodies_.pop_back();
      std::erase_if(bodies_, [&](const auto& kv) { return kv.second == variant + "_code"; });
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
  lifted_.clear();
  switch (K.kind) {
    case KernelKind::pointwise: body = pointwise_body(K, 0); break;
    case KernelKind::matmul: body = matmul_body(K); break;
    case KernelKind::conv: body = conv_body(K); break;
    case KernelKind::pool: body = pool_body(K); break;
    case KernelKind::attention: body = attention_body(K); break;
    case KernelKind::rowwise: body = rowwise_body(K); break;
    case KernelKind::reduction: body = reduction_body(K); break;
  }
  out_.source += std::string(kUnitMark) + "// kernel " + std::to_string(k) + ": " + std::string(kernel_kind_name(K.kind)) + " over " +
                 shape_str(K.space) + (knobs_.label.empty() ? "" : " (candidate: " + knobs_.label + ")") + "\n";
  // The code reads its buffers through a list of slots (tj_buf), so that
  // kernels alike share one function: the first one's, called by the
  // others with their own slots.
  std::vector<ValueId> slots;
  const std::string declarations = pointers_through_slots(&slots);
  std::string code = declarations;
  // Each part's lambda declares the kernel's pointers and sizes again, as
  // locals of its own: captured (by reference or by value), every use is a
  // load through the closure that GCC does not hoist out of an `omp simd`
  // loop, and vectorizes as gathers (convnext's layer norms: 36 a kernel).
  body = replace_all(body, kPartLambda, kPartLambda + declarations);
  // Share `id` of `nt`, split over the pool when the program has tj_team
  // and the runtime says so (the tj_slot_split_small slot, measured per program); alone, all of it. One part per thread: these kernels take a few
  // microseconds, where each further part's claim costs more than it
  // balances (tiny decode 11.6-14.0 us against 15.7-17.6 with 4 per thread).
  if (team_work_ > 0) {
    code += "  const auto part = " + kPartLambda + declarations + "    const int id = (int)tj_part, nt = (int)tj_parts; "
            "(void)tj_thread;\n" + body + "  };\n  if (tj_team && *(const int*)" + slot(tj_slot_split_small) + ") tj_parallel(" + pool() +
            ", tj_threads(" + pool() + "), part);\n  else part(0, 1, 0);\n";
  } else {
    code += body;
  }
  const std::string fn = name + "_code";
  auto [it, fresh] = bodies_.try_emplace(positional_names(code), fn);
  const std::string params = "(void** t, const int64_t* tj_buf, const int64_t* tj_k)";
  if (fresh) {
    const size_t begin = out_.source.size();
    out_.source += "__attribute__((noinline)) void " + fn + params + " {\n  (void)tj_buf; (void)tj_k;\n" + code + "}\n";
    if (!lifted_.empty()) lifted_bodies_.push_back({it, begin, out_.source.size(), lifted_});
  } else {
    for (LiftedBody& b : lifted_bodies_)
      if (b.body == it) b.same &= b.values == lifted_;
    out_.source += "void " + it->second + params + ";  // the code of a kernel alike\n";
  }
  out_.source += "void " + name + "(void** t) {\n";
  if (!slots.empty()) out_.source += "  static const int64_t tj_buf[] = {" + comma_list(slots) + "};\n";
  if (!lifted_.empty()) out_.source += "  static const int64_t tj_k[] = {" + comma_list(lifted_) + "};\n";
  out_.source += "  " + it->second + "(t, " + (slots.empty() ? "nullptr" : "tj_buf") + ", " + (lifted_.empty() ? "nullptr" : "tj_k") + ");\n}\n\n";
  temp_.clear();  // temporaries are only visible to their kernel
  return team_work_;
}

void Emitter::unlift() {
  for (auto b = lifted_bodies_.rbegin(); b != lifted_bodies_.rend(); ++b) {  // from the back: the earlier ones' offsets hold
    if (!b->same) continue;
    std::string code = out_.source.substr(b->begin, b->end - b->begin);
    for (size_t i = 0; i < b->values.size(); ++i) {
      const std::string ref = "tj_k[" + std::to_string(i) + "]", value = std::to_string(b->values[i]) + "LL";
      for (size_t at = code.find(ref); at != std::string::npos; at = code.find(ref, at + value.size())) code.replace(at, ref.size(), value);
    }
    out_.source.replace(b->begin, b->end - b->begin, code);
  }
  lifted_bodies_.clear();
}

std::string Emitter::lift(int64_t value) {
  lifted_.push_back(value);
  return "tj_k[" + std::to_string(lifted_.size() - 1) + "]";
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
  const std::string declarations = pointers();
  body = replace_all(body, kPartLambda, kPartLambda + declarations);  // as emit_function's parts
  out_.source += std::string(kUnitMark) + "void " + name + "(void** t, void* dst) {\n" + declarations + body + "}\n\n";
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
    if (indices_in_range(ind, len)) continue;  // known at compile time
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
