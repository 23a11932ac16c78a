#include "codegen/cpp/emit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "tensorjit/error.h"

namespace tj {

namespace {

using Idx = std::vector<std::string>;

constexpr int64_t kParallelElements = int64_t{1} << 15;  // below this a fork/join costs more than it saves
constexpr int64_t kGemvParallelElements = int64_t{1} << 18;  // a GEMV reading fewer weights stays on one thread
constexpr int64_t kTeamSplitElements = int64_t{1} << 12;  // a small GEMV or attention splits from here...
constexpr int64_t kTeamElements = int64_t{1} << 16;       // ...when the program's small splits add up to this
constexpr int kGemvPartials = 8;    // a large GEMV over [K, N] weights sums this many partial results
// A matmul of at least kSplitMatmul multiply-adds splits over output columns
// into blocks whose count depends on N alone (see tj_matmul_blocks in the
// preamble): results do not depend on the thread count.
constexpr int64_t kSplitMatmul = int64_t{1} << 17;
constexpr int kPartsPerThread = 4;  // parts per pool thread of a split loop: late threads leave less undone

std::string ctype(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::i64: return "int64_t";
    case DType::i32: return "int32_t";
    case DType::boolean: return "uint8_t";
    default: throw Error("code generation does not support " + std::string(dtype_name(t)) + " yet");
  }
}

std::string literal(double v, DType t) {
  if (!is_float(t)) {  // constants are doubles in [-2^63, 2^63): -2^63 has no literal of its own
    if (v <= -9223372036854775808.0) return "(" + ctype(t) + ")(-9223372036854775807LL-1)";
    return "(" + ctype(t) + ")" + std::to_string(static_cast<int64_t>(v)) + "LL";
  }
  if (std::isnan(v)) return "(" + ctype(t) + ")NAN";
  if (std::isinf(v)) return v > 0 ? "(" + ctype(t) + ")INFINITY" : "(" + ctype(t) + ")(-INFINITY)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return "(" + ctype(t) + ")" + std::string(buf);
}

// Sizes are Dims: constants, or polynomials over the graph's size symbols,
// which generated code reads at run time (C() prints them).
using Sizes = std::vector<Dim>;

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

Idx loop_vars(size_t rank, const std::string& prefix = "i") {
  Idx v;
  for (size_t d = 0; d < rank; ++d) v.push_back(prefix + std::to_string(d));
  return v;
}

// A strided view of a base buffer: element (i0..) at offset + sum(i_d * stride_d).
struct Strided {
  ValueId base;
  Dim offset = 0;
  Sizes strides;
};

class Emitter {
 public:
  Emitter(const Graph& g, const Schedule& s, const SymEnv& hint)
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
        if (g.node(v).op == Op::kv_write && kv_write_in_place(g, v)) in_mem_[static_cast<size_t>(v)] = true;  // it is its cache
    }
  }

  EmittedProgram run() {
    for (size_t k = 0; k < s_.kernels.size(); ++k) emit_kernel(static_cast<int>(k));
    // Small GEMVs and attentions split over the pool only when the program
    // has enough of them (a decode step): one alone is not worth the wake-ups.
    out_.source = prelude() + "static const bool tj_team = " + (team_work_total_ >= kTeamElements ? "true" : "false") + ";\n\n" +
                  out_.source;
    for (size_t o = 0; o < g_.outputs().size(); ++o) emit_output(o);
    emit_index_checks();
    out_.source += "}  // extern \"C\"\n";
    return std::move(out_);
  }

 private:
  static DType check_dtype(DType t) {
    (void)ctype(t);
    return t;
  }
  Sizes shape(ValueId v) const { return g_.type(v).shape; }
  // A size's value for decisions (parallel or not, team or not): at the hint.
  int64_t hint(const Dim& d) const { return d.eval(hint_); }
  std::string T(ValueId v) const { return ctype(g_.type(v).dtype); }
  // Value v's data as the function's local pointer p<v>, declared at its top
  // (see pointers()): loaded from the table once, not in every loop.
  std::string ptr(ValueId v) {
    used_.insert(v);
    return "p" + std::to_string(v);
  }
  // Declarations of the pointers a function body used; resets the set.
  std::string pointers() {
    std::string d;
    for (ValueId v : used_) d += "  " + T(v) + "* const p" + std::to_string(v) + " = (" + T(v) + "*)t[" + std::to_string(v) + "];\n";
    used_.clear();
    for (size_t k = 0; k < out_.symbols.size(); ++k)  // sizes: t[n+2] holds their values
      d += "  const int64_t " + sym_name(out_.symbols[k]) + " = ((const int64_t*)t[" + std::to_string(g_.size() + 2) + "])[" +
           std::to_string(k) + "];\n";
    return d;
  }

  static std::string prelude() {
    return "// Generated by tensorjit. One function per kernel; t[v] holds value v's data.\n"
           "#include <cblas.h>\n#include <algorithm>\n#include <cmath>\n#include <cstdint>\n#include <cstring>\n#include <limits>\n#include <type_traits>\n"
           "// (not <immintrin.h> or <thread>: they double the compile time)\n\n"
           "// The process's thread pool (src/runtime/thread_pool.h); t[n+1] points to it.\n"
           "struct tj_parallel_api {\n  void (*run)(void*, int64_t, void (*)(void*, int64_t, int64_t, int), void*);\n  void* pool;\n  int64_t threads;\n};\n"
           "// f(part, parts, thread) for each part in [0, parts), on the pool; `thread` indexes scratch.\n"
           "template <class F> static inline void tj_parallel(void* api, int64_t parts, const F& f) {\n"
           "  const tj_parallel_api* a = (const tj_parallel_api*)api;\n"
           "  if (a->threads <= 1) { for (int64_t p = 0; p < parts; ++p) f(p, parts, 0); return; }\n"
           "  a->run(a->pool, parts, [](void* c, int64_t p, int64_t n, int th) { (*(const F*)c)(p, n, th); }, (void*)&f);\n}\n"
           "static inline int64_t tj_threads(void* api) { return ((const tj_parallel_api*)api)->threads; }\n"
           "// Column blocks of a split matmul: N/256 of them (at most 16) for N >= 512, else two (each\n"
           "// block is one more BLAS call, which a single thread pays for too).\n"
           "static inline int64_t tj_matmul_blocks(int64_t n) { return n >= 512 ? std::min<int64_t>(16, n / 256) : 2; }\n\n"
           "extern \"C\" int tj_status;\nint tj_status = 0;\n\n"
           "template <class T> static inline T tj_max(T a, T b) {\n"
           "  if (a != a || b != b) return a != a ? a : b;\n  if (a != b) return a > b ? a : b;\n  return std::signbit(a) ? b : a;\n}\n"
           "template <class T> static inline T tj_min(T a, T b) { return -tj_max(-a, -b); }\n"
           "template <class T> static inline T tj_select(bool c, T a, T b) { return c ? a : b; }\n"
           "// Integers wrap (two's complement, through unsigned arithmetic: no UB); division\n"
           "// truncates, by zero is an error (tj_status 2), INT_MIN / -1 wraps to INT_MIN.\n"
           "template <class T> using tj_u = std::make_unsigned_t<T>;\n"
           "template <class T> static inline T tj_iadd(T a, T b) { return (T)((tj_u<T>)a + (tj_u<T>)b); }\n"
           "template <class T> static inline T tj_isub(T a, T b) { return (T)((tj_u<T>)a - (tj_u<T>)b); }\n"
           "template <class T> static inline T tj_imul(T a, T b) { return (T)((tj_u<T>)a * (tj_u<T>)b); }\n"
           "template <class T> static inline T tj_ineg(T a) { return (T)((tj_u<T>)0 - (tj_u<T>)a); }\n"
           "template <class T> static inline T tj_iabs(T a) { return a < 0 ? tj_ineg(a) : a; }\n"
           "template <class T> static inline T tj_idiv(T a, T b) {\n"
           "  if (b == 0) { __atomic_store_n(&tj_status, 2, __ATOMIC_RELAXED); return 0; }\n"
           "  return b == -1 ? tj_ineg(a) : (T)(a / b);\n}\n"
           "// Float to integer saturates to the target's range; NaN becomes 0.\n"
           "template <class T, class F> static inline T tj_f2i(F x) {\n"
           "  const F lim = sizeof(T) == 4 ? (F)2147483648.0 : (F)9223372036854775808.0;  // exact powers of two\n"
           "  if (x != x) return 0;\n"
           "  if (x >= lim) return std::numeric_limits<T>::max();\n"
           "  if (x < -lim) return std::numeric_limits<T>::min();\n"
           "  return (T)x;\n}\n"
           "// exp for float: Cody-Waite reduction and a degree-6 polynomial (Cephes), within 2 ulp,\n"
           "// branch-free so loops vectorize; results below 2^-126 flush to zero.\n"
           "static inline float tj_expf(float x) {\n"
           "  float c = x < -87.33f ? -87.33f : x;  // selects, not fmin/fmax: those keep GCC from vectorizing\n"
           "  c = c > 88.72f ? 88.72f : c;\n"
           "  const float n = std::floor(c * 1.44269504088896341f + 0.5f);\n"
           "  const float r = c - n * 0.693359375f + n * 2.12194440e-4f;\n"
           "  float p = 1.9875691500e-4f;\n"
           "  p = p * r + 1.3981999507e-3f; p = p * r + 8.3334519073e-3f; p = p * r + 4.1665795894e-2f;\n"
           "  p = p * r + 1.6666665459e-1f; p = p * r + 5.0000001201e-1f;\n"
           "  const float e = p * r * r + r + 1.0f;\n"
           "  int32_t bits; const int32_t k = ((int32_t)n + 127) << 23; std::memcpy(&bits, &k, 4);\n"
           "  float scale; std::memcpy(&scale, &bits, 4);\n"
           "  const float y = x < -87.33f ? 0.0f : (x > 88.72f ? INFINITY : e * scale);\n"
           "  return x != x ? x : y;\n}\n"
           "static inline double tj_exp(double x) { return std::exp(x); }\n"
           "static inline float tj_exp(float x) { return tj_expf(x); }\n\n"
           "static inline int64_t tj_index(int64_t i, int64_t n) {\n"
           "  if (i < -n || i >= n) { tj_status = 1; return 0; }\n  return i < 0 ? i + n : i;\n}\n\nextern \"C\" {\n\n";
  }

  // ---- reading values ------------------------------------------------------
  // The index of operand `o` (shape so) read at the consumer's index `idx`
  // (shape out), numpy-broadcast.
  Idx broadcast(ValueId o, const Sizes& out, const Idx& idx) const {
    auto so = shape(o);
    Idx r(so.size());
    size_t off = out.size() - so.size();
    for (size_t d = 0; d < so.size(); ++d) r[d] = so[d] == Dim(1) ? "0" : idx[d + off];
    return r;
  }

  // The value of `o` at index `idx` (of o's own shape), as a C expression.
  std::string load(ValueId o, const Idx& idx) {
    auto it = local_.find(o);
    if (it != local_.end()) return it->second;
    const Node& n = g_.node(o);
    if (in_mem_[static_cast<size_t>(o)] || is_temp(o)) return ptr(o) + "[" + flat(idx, shape(o)) + "]";
    // A view with a strided layout over its buffer: one multiply-add per dim.
    if (g_.node(o).def().category == OpCategory::view) {
      if (auto st = strided(o)) {
        std::string e = C(st->offset);
        for (size_t d = 0; d < idx.size(); ++d)
          if (st->strides[d] != Dim(0) && idx[d] != "0") e += " + (" + idx[d] + ")*" + C(st->strides[d]);
        return ptr(st->base) + "[" + e + "]";
      }
    }
    auto so = shape(o);
    switch (n.op) {
      case Op::constant: {  // a splat (an empty constant has no value: it is never read)
        const auto& d = *n.const_data();
        return literal(d.empty() ? 0.0 : d[0], n.type.dtype);
      }
      case Op::reshape:
      case Op::squeeze:
      case Op::unsqueeze: {
        ValueId x = n.inputs[0];
        auto sx = shape(x);
        return load(x, unflat(flat(idx, so), sx));
      }
      case Op::permute: {
        const auto& p = n.attr_ints("perm");
        Idx xi(p.size());
        for (size_t i = 0; i < p.size(); ++i) xi[static_cast<size_t>(p[i])] = idx[i];
        return load(n.inputs[0], xi);
      }
      case Op::expand: return load(n.inputs[0], broadcast(n.inputs[0], so, idx));
      case Op::slice: {
        Idx xi = idx;
        size_t a = static_cast<size_t>(n.attr_int("axis"));
        int64_t step = n.attr_int("step");
        const Dim& len = so[a];
        xi[a] = len == Dim(0) || len == Dim(1) ? C(n.attr_dim("start"))
                                               : "(" + C(n.attr_dim("start")) + "+" + std::to_string(step) + "LL*(" + idx[a] + "))";
        return load(n.inputs[0], xi);
      }
      case Op::gather: return load_gather(n, idx);
      case Op::iota: return "(" + T(o) + ")(" + idx[0] + ")";
      case Op::causal_mask:
        return "((" + idx[1] + ") <= (int64_t)(" + load(n.inputs[0], {}) + ") + (" + idx[0] + ") ? (" + T(o) + ")0 : (" + T(o) +
               ")(-INFINITY))";
      default:
        if (n.def().category == OpCategory::elementwise) return elementwise(n, idx);
        throw Error("code generation: cannot read %" + std::to_string(o) + " (" + n.def().name + ") here");
    }
  }

  // An elementwise op's value at `idx` (its own output index).
  std::string elementwise(const Node& n, const Idx& idx) {
    auto so = n.type.shape;
    std::vector<std::string> a;
    for (ValueId in : n.inputs) a.push_back(load(in, broadcast(in, so, idx)));
    std::string t = ctype(n.type.dtype);
    auto c = [&](double v) { return literal(v, n.type.dtype); };
    if (is_int(n.type.dtype)) {  // wrapping arithmetic (docs/ir.md)
      switch (n.op) {
        case Op::neg: return "tj_ineg<" + t + ">(" + a[0] + ")";
        case Op::abs: return "tj_iabs<" + t + ">(" + a[0] + ")";
        case Op::add: return "tj_iadd<" + t + ">(" + a[0] + ", " + a[1] + ")";
        case Op::sub: return "tj_isub<" + t + ">(" + a[0] + ", " + a[1] + ")";
        case Op::mul: return "tj_imul<" + t + ">(" + a[0] + ", " + a[1] + ")";
        case Op::div: return "tj_idiv<" + t + ">(" + a[0] + ", " + a[1] + ")";
        case Op::max: return "std::max<" + t + ">(" + a[0] + ", " + a[1] + ")";
        case Op::min: return "std::min<" + t + ">(" + a[0] + ", " + a[1] + ")";
        default: break;
      }
    }
    switch (n.op) {
      case Op::neg: return "(-(" + a[0] + "))";
      case Op::exp: return "tj_exp((" + t + ")(" + a[0] + "))";
      case Op::log: return "std::log(" + a[0] + ")";
      case Op::tanh: return "std::tanh(" + a[0] + ")";
      case Op::sqrt: return "std::sqrt(" + a[0] + ")";
      case Op::rsqrt: return "(" + c(1) + "/std::sqrt(" + a[0] + "))";
      case Op::sin: return "std::sin(" + a[0] + ")";
      case Op::cos: return "std::cos(" + a[0] + ")";
      case Op::abs: return "std::abs(" + a[0] + ")";
      case Op::sigmoid: return "(" + c(1) + "/(" + c(1) + "+tj_exp((" + t + ")(-(" + a[0] + ")))))";
      case Op::recip: return "(" + c(1) + "/(" + a[0] + "))";
      case Op::silu: return "((" + a[0] + ")/(" + c(1) + "+tj_exp((" + t + ")(-(" + a[0] + ")))))";
      case Op::gelu:
        return "([](double x){ return 0.5*x*(1.0+std::tanh(" + literal(std::sqrt(2.0 / M_PI), DType::f64) +
               "*(x+0.044715*x*x*x))); }((double)(" + a[0] + ")))";
      case Op::cast: {
        DType to = n.attr_dtype("to");
        DType from = g_.type(n.inputs[0]).dtype;
        if (to == DType::boolean) return "(uint8_t)((" + a[0] + ") != 0)";
        if (is_int(to) && is_float(from)) return "tj_f2i<" + t + ", " + ctype(from) + ">(" + a[0] + ")";
        return "(" + t + ")(" + a[0] + ")";  // int to int wraps (C++20), to float rounds
      }
      case Op::add: return "(" + a[0] + "+" + a[1] + ")";
      case Op::sub: return "(" + a[0] + "-" + a[1] + ")";
      case Op::mul: return "(" + a[0] + "*" + a[1] + ")";
      case Op::div: return "(" + a[0] + "/" + a[1] + ")";
      case Op::max: return "tj_max<" + t + ">(" + a[0] + ", " + a[1] + ")";
      case Op::min: return "tj_min<" + t + ">(" + a[0] + ", " + a[1] + ")";
      case Op::pow: return "std::pow(" + a[0] + ", " + a[1] + ")";
      case Op::eq: return "(uint8_t)(" + a[0] + "==" + a[1] + ")";
      case Op::ne: return "(uint8_t)(" + a[0] + "!=" + a[1] + ")";
      case Op::lt: return "(uint8_t)(" + a[0] + "<" + a[1] + ")";
      case Op::le: return "(uint8_t)(" + a[0] + "<=" + a[1] + ")";
      case Op::gt: return "(uint8_t)(" + a[0] + ">" + a[1] + ")";
      case Op::ge: return "(uint8_t)(" + a[0] + ">=" + a[1] + ")";
      // Both branches are evaluated, as in the interpreter (an index out of
      // range in either is an error), and the select vectorizes as a blend.
      case Op::where: return "tj_select<" + t + ">(" + a[0] + ", " + a[1] + ", " + a[2] + ")";
      default: throw Error(std::string("code generation: ") + n.def().name + " is not elementwise");
    }
  }

  // ---- loops ---------------------------------------------------------------
  // A loop nest over `sh`; `columns` narrows the innermost loop to this
  // thread's share [n0, n1) of a kernel split over columns.
  std::string loops(const Sizes& sh, const Idx& vars, const std::string& body, bool allow_parallel = true,
                    bool simd = true, bool columns = false) {
    if (sh.empty()) return "{\n" + body + "}\n";
    std::string open, close;
    bool par = allow_parallel && !columns && hint(count(sh)) >= kParallelElements && hint(sh[0]) > 1;
    for (size_t d = 0; d < sh.size(); ++d) {
      bool innermost = d + 1 == sh.size();
      if (d == 0 && par) {
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

  // ---- the thread pool -----------------------------------------------------
  // Generated code runs parallel work as parts on the process's pool
  // (src/runtime/thread_pool.h): a lambda called as (tj_part, tj_parts,
  // tj_thread), where tj_thread (< the pool's threads) indexes scratch.
  std::string pool() const { return "t[" + std::to_string(g_.size() + 1) + "]"; }
  std::string open_parallel(const std::string& parts) const {
    return "tj_parallel(" + pool() + ", " + parts + ", [&](int64_t tj_part, int64_t tj_parts, int tj_thread) {\n(void)tj_part; (void)tj_parts; (void)tj_thread;\n";
  }
  static std::string close_parallel() { return "});\n"; }
  std::string split_parts() const { return std::to_string(kPartsPerThread) + "*tj_threads(" + pool() + ")"; }
  // `for (var = 0; var < n; ++var) {` split into parts over the pool; the
  // body and "}" follow, then close_parallel_loop().
  std::string open_parallel_loop(const std::string& var, const std::string& n, bool simd) const {
    std::string c = open_parallel("std::min<int64_t>(" + n + ", " + split_parts() + ")");
    c += "const int64_t tj_lo = " + n + "*tj_part/tj_parts, tj_hi = " + n + "*(tj_part + 1)/tj_parts;\n";
    c += simd ? "#pragma omp simd\n" : "";
    return c + "for (int64_t " + var + " = tj_lo; " + var + " < tj_hi; ++" + var + ") {\n";
  }
  static std::string close_parallel_loop() { return "}\n" + close_parallel(); }

  bool is_temp(ValueId v) const { return temp_.count(v) > 0; }
  void make_temp(ValueId v) {
    if (in_mem_[static_cast<size_t>(v)] || temp_.count(v)) return;
    temp_.insert(v);
    out_.temporaries.push_back(v);
    out_.temporary_kernel.push_back(current_kernel_);
    out_.temporary_sizes.push_back(count(shape(v)) * static_cast<int64_t>(dtype_size(g_.type(v).dtype)));
  }

  // Values of kernel k that others in it read from memory: through a view,
  // or as a store's data.
  void plan_temporaries(const Kernel& K, int k) {
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
        if (n.op == Op::concat || n.op == Op::kv_write) ++seg;
      }
    }
    // Results written by a library call or a store loop live in memory.
    if (K.kind == KernelKind::matmul || K.kind == KernelKind::attention) make_temp(K.ops[0]);
    for (ValueId v : K.ops)
      if (g_.node(v).op == Op::concat || g_.node(v).op == Op::kv_write) make_temp(v);
  }

  // ---- kernels -------------------------------------------------------------
  std::string name_of(int k) const {
    const Kernel& K = s_.kernels[static_cast<size_t>(k)];
    std::string n = "k" + std::to_string(k) + "_" + std::string(kernel_kind_name(K.kind));
    std::set<std::string> seen;
    for (ValueId v : K.ops) {
      std::string op = g_.node(v).def().name;
      if (seen.insert(op).second && seen.size() <= 4) n += "_" + op;
    }
    return n;
  }

  void emit_kernel(int k) {
    const Kernel& K = s_.kernels[static_cast<size_t>(k)];
    temp_.clear();
    plan_temporaries(K, k);
    std::string name = name_of(k);
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
    out_.source += "// kernel " + std::to_string(k) + ": " + std::string(kernel_kind_name(K.kind)) + " over " + shape_str(K.space) + "\n";
    // Share `id` of `nt`, split over the pool when the program has tj_team;
    // alone, all of it. One part per thread: these kernels take a few
    // microseconds, where each further part's claim costs more than it
    // balances (tiny decode 11.6-14.0 us against 15.7-17.6 with 4 per thread).
    if (team_work_ > 0) {
      std::string decl = pointers();
      out_.source += "void " + name + "(void** t) {\n" + decl + "  const auto part = [&](int64_t tj_part, int64_t tj_parts, int tj_thread) {\n" +
                     "    const int id = (int)tj_part, nt = (int)tj_parts; (void)tj_thread;\n" + body + "  };\n" +
                     "  if (tj_team) tj_parallel(" + pool() + ", tj_threads(" + pool() + "), part); else part(0, 1, 0);\n}\n\n";
    } else {
      out_.source += "void " + name + "(void** t) {\n" + pointers() + body + "}\n\n";
    }
    out_.kernel_symbols.push_back(name);
    team_work_total_ += team_work_;
    temp_.clear();  // temporaries are only visible to their kernel
  }

  // Elementwise ops from `first` on, in loop nests over the kernel's space,
  // every op in registers; a store (concat, kv_write) ends a nest and runs as
  // a copy loop, in program order.
  std::string pointwise_body(const Kernel& K, size_t first, bool columns = false) {
    Sizes sp = K.space;
    Idx iv = loop_vars(sp.size());
    std::string code, inner;
    local_.clear();
    auto flush = [&] {
      if (!inner.empty()) code += loops(sp, iv, inner, true, true, columns);
      inner.clear();
      local_.clear();
    };
    for (size_t i = first; i < K.ops.size(); ++i) {
      ValueId v = K.ops[i];
      const Node& n = g_.node(v);
      if (n.op == Op::concat || n.op == Op::kv_write) {
        flush();
        code += store(v);
        continue;
      }
      if (n.type.shape != sp) throw Error("code generation: op outside the kernel's iteration space");
      std::string var = "v" + std::to_string(v);
      inner += "  const " + T(v) + " " + var + " = " + elementwise_or_gather(n, iv) + ";\n";
      if (in_mem_[static_cast<size_t>(v)] || is_temp(v)) inner += "  " + ptr(v) + "[" + flat(iv, sp) + "] = " + var + ";\n";
      local_[v] = var;
    }
    flush();
    return code;
  }

  std::string elementwise_or_gather(const Node& n, const Idx& idx) {
    if (n.op == Op::gather) return load_gather(n, idx);
    return elementwise(n, idx);
  }
  // A gather's value at `idx`: the table read at the index it loads (bounds
  // checked: an index out of range sets tj_status).
  std::string load_gather(const Node& n, const Idx& idx) {
    ValueId table = n.inputs[0], ind = n.inputs[1];
    size_t a = static_cast<size_t>(n.attr_int("axis"));
    size_t ri = static_cast<size_t>(g_.type(ind).rank());
    auto st = shape(table);
    Idx ii(idx.begin() + static_cast<long>(a), idx.begin() + static_cast<long>(a + ri));
    Idx ti(idx.begin(), idx.begin() + static_cast<long>(a));
    std::string checked = "tj_index((int64_t)(" + load(ind, ii) + "), " + C(st[a]) + ")";
    ti.push_back(checked);
    ti.insert(ti.end(), idx.begin() + static_cast<long>(a + ri), idx.end());
    std::string e = load(table, ti);
    // A table read that does not move along the axis (length 1, or
    // broadcast) drops the index: it is still checked.
    if (e.find(checked) == std::string::npos) e = "((void)" + checked + ", " + e + ")";
    return e;
  }

  // concat and kv_write as copy loops.
  std::string store(ValueId v) {
    const Node& n = g_.node(v);
    std::string code;
    if (n.op == Op::concat) {
      auto so = shape(v);
      size_t axis = static_cast<size_t>(n.attr_int("axis"));
      Dim at = 0;
      for (ValueId in : n.inputs) {
        auto si = shape(in);
        Idx iv = loop_vars(si.size(), "c");
        Idx oi = iv;
        oi[axis] = "(" + iv[axis] + "+" + C(at) + ")";
        code += loops(si, iv, "  " + ptr(v) + "[" + flat(oi, so) + "] = " + load(in, iv) + ";\n");
        at = at + si[axis];
      }
      return code;
    }
    // kv_write: in place, the output is the cache itself; otherwise copy the
    // cache first. Then write the rows at pos.
    ValueId rows = n.inputs[1];
    auto sr = shape(rows), sc = shape(n.inputs[0]);
    size_t axis = static_cast<size_t>(n.attr_int("axis"));
    if (!kv_write_in_place(g_, v)) {
      Idx all = loop_vars(sc.size(), "c");
      code += loops(sc, all, "  " + ptr(v) + "[" + flat(all, sc) + "] = " + load(n.inputs[0], all) + ";\n");
    }
    Idx iv = loop_vars(sr.size(), "c");
    Idx ci = iv;
    ci[axis] = "(" + iv[axis] + "+pos)";
    code += "{\n  const int64_t pos = (int64_t)(" + load(n.inputs[2], {}) + ");\n";
    code += "  if (pos < 0 || pos + " + C(sr[axis]) + " > " + C(sc[axis]) + ") { tj_status = 3; return; }\n";
    code += loops(sr, iv, "  " + ptr(v) + "[" + flat(ci, sc) + "] = " + load(rows, iv) + ";\n");
    return code + "}\n";
  }

  // A strided description of `o` if its view chain allows one.
  std::optional<Strided> strided(ValueId o) const {
    const Node& n = g_.node(o);
    if (in_mem_[static_cast<size_t>(o)] || temp_.count(o)) return Strided{o, 0, contiguous_strides(shape(o))};
    if (n.def().category != OpCategory::view) return std::nullopt;
    auto inner = strided(n.inputs[0]);
    if (!inner) return std::nullopt;
    auto so = shape(o), si = shape(n.inputs[0]);
    Strided r = *inner;
    switch (n.op) {
      case Op::permute: {
        const auto& p = n.attr_ints("perm");
        r.strides.clear();
        for (int64_t x : p) r.strides.push_back(inner->strides[static_cast<size_t>(x)]);
        return r;
      }
      case Op::expand: {
        r.strides.assign(so.size(), Dim(0));
        size_t off = so.size() - si.size();
        for (size_t d = 0; d < si.size(); ++d) r.strides[d + off] = si[d] == Dim(1) ? Dim(0) : inner->strides[d];
        return r;
      }
      case Op::slice: {
        size_t a = static_cast<size_t>(n.attr_int("axis"));
        r.offset = r.offset + n.attr_dim("start") * inner->strides[a];
        // A slice of one element (or none) never moves along the axis: any step.
        r.strides[a] = so[a] == Dim(0) || so[a] == Dim(1) ? Dim(0) : r.strides[a] * Dim(n.attr_int("step"));
        return r;
      }
      default: {  // reshape, squeeze, unsqueeze: only of a contiguous layout (a size-1 dim's stride never matters)
        auto cs = contiguous_strides(si);
        for (size_t d = 0; d < si.size(); ++d)
          if (si[d] != Dim(1) && inner->strides[d] != cs[d]) return std::nullopt;
        r.strides = contiguous_strides(so);
        return r;
      }
    }
  }

  // GEMM per batch through OpenBLAS (GEMV for one row), then the epilogue.
  std::string matmul_body(const Kernel& K) {
    ValueId mm = K.ops[0];
    const Node& n = g_.node(mm);
    ValueId a = n.inputs[0], b = n.inputs[1];
    auto so = shape(mm), sa = shape(a), sb = shape(b);
    size_t r = so.size();
    Dim M = so[r - 2], N = so[r - 1], Kd = sa.back();
    std::string code;
    std::string ty = T(mm);
    std::string blas = ty == "float" ? "s" : ty == "double" ? "d" : "";
    if (blas.empty()) throw Error("code generation: matmul of " + ty);
    auto at_least = [](const Dim& x, const Dim& y) { return x == y || (x - y).provably_positive(); };
    // Operands BLAS can read in place (row-major, or transposed), or copies
    // into temporaries. `rows` x `cols` is the matrix BLAS sees.
    auto prepare = [&](ValueId x, const Dim& rows, const Dim& cols, std::string* p, std::string* trans, Dim* ld, Sizes* batch_strides) {
      auto sx = shape(x);
      size_t rx = sx.size();
      auto fits = [&](const Strided& st, bool t) {
        const Dim &sr = st.strides[rx - 2], &sc = st.strides[rx - 1];
        return t ? (sr == Dim(1) && (cols == Dim(1) || at_least(sc, rows))) : (sc == Dim(1) && (rows == Dim(1) || at_least(sr, cols)));
      };
      auto st = strided(x);
      if (!st || (!fits(*st, false) && !fits(*st, true))) {
        make_temp_copy(x, &code);
        st = Strided{x, 0, contiguous_strides(sx)};
      }
      bool t = !fits(*st, false);
      *trans = t ? "CblasTrans" : "CblasNoTrans";
      *ld = t ? (cols == Dim(1) ? rows : st->strides[rx - 1]) : (rows == Dim(1) ? cols : st->strides[rx - 2]);
      if (*ld == Dim(0)) *ld = Dim(1);
      *p = ptr(st->base) + " + " + C(st->offset);
      batch_strides->assign(st->strides.begin(), st->strides.end() - 2);
    };
    std::string pa, pb, ta, tb;
    Dim lda, ldb;
    Sizes bsa, bsb;
    prepare(a, M, Kd, &pa, &ta, &lda, &bsa);
    prepare(b, Kd, N, &pb, &tb, &ldb, &bsb);
    // Batch loop (numpy-broadcast batch dims).
    Sizes batch(so.begin(), so.end() - 2);
    Idx bv = loop_vars(batch.size(), "b");
    auto batch_offset = [&](const Sizes& bs, const Sizes& sx) {
      std::string e = "0";
      size_t off = batch.size() - bs.size();
      for (size_t d = 0; d < bs.size(); ++d)
        if (sx[d] != Dim(1) && bs[d] != Dim(0)) e += "+" + bv[d + off] + "*" + C(bs[d]);
      return e;
    };
    Sizes sab(sa.begin(), sa.end() - 2), sbb(sb.begin(), sb.end() - 2);
    std::string c_ptr = ptr(mm) + " + (" + flat(bv, batch) + ")*" + C(M * N);
    std::string call;
    bool stores = false, epilogue_in_blocks = false;
    for (ValueId v : K.ops) stores |= g_.node(v).op == Op::concat || g_.node(v).op == Op::kv_write;
    int64_t weights = hint(Kd * N);
    bool team = M == Dim(1) && ta == "CblasNoTrans" && count(batch) == Dim(1) && code.empty() && !stores && weights >= kTeamSplitElements &&
                weights < kGemvParallelElements;
    if (team) {
      team_work_ = weights;
      code += columns_of(N);
      call = gemv_columns(g_.type(mm).dtype, pa + " + (" + batch_offset(bsa, sab) + ")", pb + " + (" + batch_offset(bsb, sbb) + ")",
                          tb == "CblasTrans", ldb, c_ptr, Kd, N);
    } else if (M == Dim(1) && ta == "CblasNoTrans") {
      call = gemv(ty, pa + " + (" + batch_offset(bsa, sab) + ")", pb + " + (" + batch_offset(bsb, sbb) + ")", tb == "CblasTrans", ldb,
                  c_ptr, Kd, N);
    } else {
      // OpenBLAS runs single-threaded; large products are split over output
      // columns between this library's OpenMP threads, so BLAS and the other
      // kernels share one thread pool instead of fighting over the cores.
      // Column blocks fixed by N, not by the thread count: OpenBLAS rounds a
      // column differently in blocks of other widths.
      bool split = hint(M * N * Kd) >= kSplitMatmul && hint(N) >= 128;
      std::string blocks = "tj_matmul_blocks(" + C(N) + ")";
      std::string A = pa + " + (" + batch_offset(bsa, sab) + ")", Bp = pb + " + (" + batch_offset(bsb, sbb) + ")";
      std::string colB = tb == "CblasNoTrans" ? "n0" : "n0*" + C(ldb);
      call = "  {\n";
      call += split ? open_parallel(blocks) : "";
      // Not split: one thread, even when called inside a split kernel.
      call += split ? "    {\n      const int nt = (int)tj_parts, id = (int)tj_part;\n" : "    {\n      const int nt = 1, id = 0;\n";
      call += "      const int64_t n0 = " + C(N) + " * id / nt / 16 * 16, n1 = id + 1 == nt ? " + C(N) + " : " + C(N) +
              " * (id + 1) / nt / 16 * 16;\n";
      call += "      if (n1 > n0) cblas_" + blas + "gemm(CblasRowMajor, " + ta + ", " + tb + ", " + C(M) + ", n1 - n0, " + C(Kd) + ", 1, " + A +
              ", " + C(lda) + ", " + Bp + " + " + colB + ", " + C(ldb) + ", 0, " + c_ptr + " + n0, " + C(N) + ");\n";
      // One product: each block runs the epilogue over its own columns
      // while they are in cache, instead of one thread over all of them.
      epilogue_in_blocks = split && count(batch) == Dim(1) && !stores && K.ops.size() > 1;
      if (epilogue_in_blocks) call += pointwise_body(K, 1, true);
      call += "    }\n" + (split ? close_parallel() : "") + "  }\n";
    }
    code += loops(batch, bv, call, false, false);
    if (!epilogue_in_blocks) code += pointwise_body(K, 1, team);
    return code;
  }

  // This thread's columns [n0, n1) of N, in whole vectors.
  static std::string columns_of(const Dim& N) {
    std::string Ns = C(N);
    return "  const int64_t n0 = " + Ns + " * id / nt / 8 * 8, n1 = id + 1 == nt ? " + Ns + " : " + Ns + " * (id + 1) / nt / 8 * 8;\n";
  }

  // y[n0, n1) of y[N] = x[K] @ B, for B row-major [K, N] (ldb) or transposed
  // [N, K]: each thread reads only its own columns of B, the same ones every
  // call.
  std::string gemv_columns(DType dtype, const std::string& x, const std::string& B, bool transposed, const Dim& ldb,
                           const std::string& y, const Dim& K, const Dim& N) {
    std::string ty = ctype(dtype);
    std::string Ks = C(K), lds = C(ldb);
    std::string c = "  {\n    const " + ty + "* x = " + x + ";\n    const " + ty + "* B = " + B + ";\n    " + ty + "* y = " + y + ";\n";
    if (transposed) {
      c += "    for (int64_t n = n0; n < n1; ++n) {\n      const " + ty + "* row = B + n*" + lds + ";\n      " + ty + " acc = 0;\n";
      c += "#pragma omp simd reduction(+:acc)\n      for (int64_t k = 0; k < " + Ks + "; ++k) acc += x[k]*row[k];\n      y[n] = acc;\n    }\n  }\n";
      return c;
    }
    // Four rows of B per pass over this thread's accumulator (in L1, in its
    // own scratch: no cache line shared with another thread's part of y): a
    // quarter of the accumulator traffic, B streamed row by row.
    std::string per = scratch(N * static_cast<int64_t>(dtype_size(dtype)));
    c += "    " + ty + "* acc = (" + ty + "*)((char*)t[" + std::to_string(g_.size()) + "] + tj_thread*" + per + ");\n";
    c += "    for (int64_t j = n0; j < n1; ++j) acc[j] = 0;\n    int64_t k = 0;\n    for (; k + 4 <= " + Ks + "; k += 4) {\n";
    c += "      const " + ty + " a0 = x[k], a1 = x[k+1], a2 = x[k+2], a3 = x[k+3];\n";
    c += "      const " + ty + "* r0 = B + k*" + lds + "; const " + ty + "* r1 = r0 + " + lds + "; const " + ty + "* r2 = r1 + " + lds +
         "; const " + ty + "* r3 = r2 + " + lds + ";\n";
    c += "#pragma omp simd\n      for (int64_t j = n0; j < n1; ++j) acc[j] += a0*r0[j] + a1*r1[j] + a2*r2[j] + a3*r3[j];\n    }\n";
    c += "    for (; k < " + Ks + "; ++k) {\n      const " + ty + " a = x[k];\n      const " + ty + "* row = B + k*" + lds + ";\n";
    c += "#pragma omp simd\n      for (int64_t j = n0; j < n1; ++j) acc[j] += a*row[j];\n    }\n";
    c += "    for (int64_t j = n0; j < n1; ++j) y[j] = acc[j];\n  }\n";
    return c;
  }

  // y[N] = x[K] @ B: B row-major [K, N] (ldb), or transposed [N, K]. Bound by
  // reading B once: for [K, N], each thread streams its own rows of B into a
  // private partial y (in scratch), then the partials are summed; for [N, K],
  // each output is one contiguous dot product. Threads only when B is large.
  std::string gemv(const std::string& ty, const std::string& x, const std::string& B, bool transposed, const Dim& ldb,
                   const std::string& y, const Dim& K, const Dim& N) {
    bool par = hint(K * N) >= kGemvParallelElements;
    std::string Ks = C(K), Ns = C(N), lds = C(ldb);
    std::string c = "  {\n    const " + ty + "* x = " + x + ";\n    const " + ty + "* B = " + B + ";\n    " + ty + "* y = " + y + ";\n";
    if (transposed) {
      c += par ? open_parallel_loop("n", Ns, false) : "    for (int64_t n = 0; n < " + Ns + "; ++n) {\n";
      c += "      const " + ty + "* row = B + n*" + lds + ";\n      " + ty + " acc = 0;\n";
      c += "#pragma omp simd reduction(+:acc)\n      for (int64_t k = 0; k < " + Ks + "; ++k) acc += x[k]*row[k];\n      y[n] = acc;\n";
      c += (par ? close_parallel_loop() : "    }\n") + "  }\n";
      return c;
    }
    // A fixed number of partial sums (the result's rounding does not depend
    // on the thread count), each in its own slot of the first thread's scratch.
    const int partials = par ? kGemvPartials : 1;
    std::string per = scratch(N * static_cast<int64_t>(sizeof(double)));
    out_.scratch_sizes.back() = (N * static_cast<int64_t>(sizeof(double)) + 64) * partials;
    c += "    char* scratch = (char*)t[" + std::to_string(g_.size()) + "];\n";
    c += "    const int used = " + std::to_string(partials) + ";\n";
    c += par ? open_parallel("used") : "";
    c += "    {\n      const int nt = used, id = " + std::string(par ? "(int)tj_part" : "0") + ";\n";
    c += "      const int64_t k0 = " + Ks + " * id / nt, k1 = " + Ks + " * (id + 1) / nt;\n";
    c += "      " + ty + "* acc = (" + ty + "*)(scratch + id*" + per + ");\n";
    c += "      std::memset(acc, 0, sizeof(" + ty + ")*" + Ns + ");\n";
    // Four rows per pass: a quarter of the accumulator traffic.
    c += "      int64_t k = k0;\n      for (; k + 4 <= k1; k += 4) {\n";
    c += "        const " + ty + " a0 = x[k], a1 = x[k+1], a2 = x[k+2], a3 = x[k+3];\n";
    c += "        const " + ty + "* r0 = B + k*" + lds + "; const " + ty + "* r1 = r0 + " + lds + "; const " + ty + "* r2 = r1 + " + lds +
         "; const " + ty + "* r3 = r2 + " + lds + ";\n";
    c += "#pragma omp simd\n        for (int64_t j = 0; j < " + Ns + "; ++j) acc[j] += a0*r0[j] + a1*r1[j] + a2*r2[j] + a3*r3[j];\n      }\n";
    c += "      for (; k < k1; ++k) {\n        const " + ty + " a = x[k];\n        const " + ty + "* row = B + k*" + lds + ";\n";
    c += "#pragma omp simd\n        for (int64_t j = 0; j < " + Ns + "; ++j) acc[j] += a*row[j];\n      }\n    }\n";
    c += par ? close_parallel() : "";
    c += "    for (int64_t j = 0; j < " + Ns + "; ++j) {\n      " + ty + " s = 0;\n";
    c += "      for (int p = 0; p < used; ++p) s += ((" + ty + "*)(scratch + p*" + per + "))[j];\n      y[j] = s;\n    }\n  }\n";
    return c;
  }

  // Per-thread scratch of `bytes` for the current kernel: its stride in
  // generated code (rounded up to 64 bytes); the executable allots every
  // thread the most any kernel needs.
  std::string scratch(const Dim& bytes) {
    out_.scratch_sizes.push_back(bytes);
    return bytes.is_const() ? C(Dim((bytes.value() + 63) / 64 * 64)) : "((" + C(bytes) + "+63LL)/64LL*64LL)";
  }

  void make_temp_copy(ValueId x, std::string* code) {
    // Materialize a view into a temporary (its own value slot).
    make_temp(x);
    auto sx = shape(x);
    Idx iv = loop_vars(sx.size(), "m");
    temp_.erase(x);  // read through the view while copying
    std::string body = "  " + ptr(x) + "[" + flat(iv, sx) + "] = " + load(x, iv) + ";\n";
    temp_.insert(x);
    *code += loops(sx, iv, body);
  }

  std::string attention_body(const Kernel& K) {
    ValueId fa = K.ops[0];
    const Node& n = g_.node(fa);
    std::string code;
    std::vector<std::string> p;
    for (int i = 0; i < 3; ++i) {
      ValueId x = n.inputs[static_cast<size_t>(i)];
      auto st = strided(x);
      if (!st || st->strides.back() != Dim(1)) {
        make_temp_copy(x, &code);
        st = Strided{x, 0, contiguous_strides(shape(x))};
      }
      std::string base = "(" + ptr(st->base) + " + " + C(st->offset) + ")";
      p.push_back(base);
      for (int d = 0; d < 3; ++d) p.push_back(C(st->strides[static_cast<size_t>(d)]));
    }
    auto sq = shape(n.inputs[0]), sk = shape(n.inputs[1]), sv = shape(n.inputs[2]);
    Dim B = sq[0], Tq = sq[2], D = sq[3], S = sk[2], Dv = sv[3];
    if (!sq[1].is_const() || !sk[1].is_const() || !Dv.is_const())
      throw Error("code generation: flash_attn needs concrete head counts and value width, got " + shape_str(sq) + " and " + shape_str(sv));
    int64_t H = sq[1].value(), Hkv = sk[1].value();
    bool causal = n.attr_bool("causal");
    std::string ty = T(fa);
    bool copies = !code.empty();  // operands copied into temporaries first
    code += "{\n";
    code += "  const int64_t off = " + (causal ? "(int64_t)(" + load(n.inputs[3], {}) + ")" : std::string("0")) + ";\n";
    code += "  const double scale = " + literal(n.attr_float("scale"), DType::f64) + ";\n";
    code += "  " + ty + "* out = " + ptr(fa) + ";\n";
    int64_t work = hint(B * H * Tq * S * (D + Dv));
    std::string BH = C(B * H);
    bool par = false;
    if (work < kParallelElements * 4 && !copies && K.ops.size() == 1 && hint(B * H) > 1) {
      team_work_ = work;  // heads split over the team: [bh0, bh1) each
      code += "  const int64_t bh0 = " + BH + " * id / nt, bh1 = " + BH + " * (id + 1) / nt;\n";
      code += "  for (int64_t bh = bh0; bh < bh1; ++bh)\n";
      code += "  for (int64_t i = 0; i < " + C(Tq) + "; ++i) {\n";
    } else if (work >= kParallelElements * 4) {  // (head, query) pairs in parts: causal rows differ in cost
      par = true;
      code += open_parallel_loop("bhi", BH + "*" + C(Tq), false);
      code += "    const int64_t bh = bhi / " + C(Tq) + ", i = bhi % " + C(Tq) + ";\n";
    } else {
      code += "  for (int64_t bh = 0; bh < " + BH + "; ++bh)\n";
      code += "  for (int64_t i = 0; i < " + C(Tq) + "; ++i) {\n";
    }
    code += "    const int64_t b = bh / " + std::to_string(H) + "LL, h = bh % " + std::to_string(H) + "LL, g = h / " +
            std::to_string(H / Hkv) + "LL;\n";
    code += "    const " + ty + "* q = " + p[0] + " + b*" + p[1] + " + h*" + p[2] + " + i*" + p[3] + ";\n";
    code += "    const " + ty + "* k = " + p[4] + " + b*" + p[5] + " + g*" + p[6] + ";\n";
    code += "    const " + ty + "* v = " + p[8] + " + b*" + p[9] + " + g*" + p[10] + ";\n";
    code += "    const int64_t kstride = " + p[7] + ", vstride = " + p[11] + ";\n";
    code += "    const int64_t limit = " + std::string(causal ? "std::min<int64_t>(" + C(S) + ", off + i + 1)" : C(S)) + ";\n";
    // Scores, running max and sum in the compute type; one block of keys at
    // a time: dot products, block max, exponentials (vectorized), then the
    // value rows weighted into the accumulator.
    code += "    " + ty + " m = -INFINITY, l = 0, acc[" + std::to_string(Dv.value()) + "] = {0};\n";
    code += "    constexpr int64_t kBlock = 64;\n";
    code += "    " + ty + " s[kBlock];\n";
    code += "    for (int64_t j0 = 0; j0 < limit; j0 += kBlock) {\n";
    code += "      const int64_t jn = std::min<int64_t>(limit - j0, kBlock);\n";
    code += "      " + ty + " bm = m;\n";
    code += "      for (int64_t j = 0; j < jn; ++j) {\n";
    code += "        const " + ty + "* kj = k + (j0 + j)*kstride;\n        " + ty + " dot = 0;\n";
    code += "#pragma omp simd reduction(+:dot)\n";
    code += "        for (int64_t d = 0; d < " + C(D) + "; ++d) dot += q[d]*kj[d];\n";
    code += "        s[j] = dot * (" + ty + ")scale;\n        bm = std::max(bm, s[j]);\n      }\n";
    code += "      const " + ty + " corr = tj_exp(m - bm);\n      l *= corr;\n";
    code += "      for (int64_t d = 0; d < " + C(Dv) + "; ++d) acc[d] *= corr;\n";
    code += "#pragma omp simd\n      for (int64_t j = 0; j < jn; ++j) s[j] = tj_exp(s[j] - bm);\n";
    code += "      for (int64_t j = 0; j < jn; ++j) {\n";
    code += "        const " + ty + " pj = s[j];\n        l += pj;\n        const " + ty + "* vj = v + (j0 + j)*vstride;\n";
    code += "#pragma omp simd\n";
    code += "        for (int64_t d = 0; d < " + C(Dv) + "; ++d) acc[d] += pj*vj[d];\n      }\n";
    code += "      m = bm;\n    }\n";
    code += "    " + ty + "* o = out + (bh*" + C(Tq) + " + i)*" + C(Dv) + ";\n";
    code += "    for (int64_t d = 0; d < " + C(Dv) + "; ++d) o[d] = limit > 0 ? acc[d]/l : (" + ty + ")NAN;\n";
    code += par ? close_parallel_loop() + "}\n" : "  }\n}\n";
    code += pointwise_body(K, 1);
    return code;
  }

  // A loop over rows; full-row ops into per-thread scratch rows, reductions
  // and per-row ops as scalars.
  std::string rowwise_body(const Kernel& K) {
    Sizes sp = K.space;
    Dim D = sp.back();
    Sizes outer(sp.begin(), sp.end() - 1);
    Dim rows = count(outer);
    std::string code;
    code += "  const int64_t scratch = " + scratch_for(K, D) + ";\n";
    bool par = hint(count(sp)) >= kParallelElements && hint(rows) > 1;
    code += par ? open_parallel_loop("row", C(rows), false) : "  for (int64_t row = 0; row < " + C(rows) + "; ++row) {\n";
    code += "    char* mine = (char*)t[" + std::to_string(g_.size()) + "] + (int64_t)" + (par ? "tj_thread" : "0") + " * scratch;\n    (void)mine;\n";
    // Row index -> outer index.
    Idx oi = loop_vars(outer.size(), "r");
    Idx row_index = unflat("row", outer);
    for (size_t d = 0; d < outer.size(); ++d) code += "    const int64_t " + oi[d] + " = " + row_index[d] + ";\n";
    Idx full = oi;
    full.push_back("j");
    Idx keep = oi;
    keep.push_back("0");
    local_.clear();
    int scratch_slot = 0;
    // Stores lead a rowwise kernel (fusion guarantees it): they run first.
    std::string leading;
    for (ValueId v : K.ops) {
      const Node& n = g_.node(v);
      auto sv = n.type.shape;
      std::string ty = T(v);
      bool is_full = sv == sp;
      bool reduce = n.def().category == OpCategory::reduction || n.op == Op::softmax || n.op == Op::rms_norm || n.op == Op::layer_norm;
      if (n.op == Op::concat || n.op == Op::kv_write) {
        leading += store(v);
        continue;
      }
      if (n.def().category == OpCategory::reduction) {
        // A last-axis reduction of an in-kernel row or an external operand.
        ValueId x = n.inputs[0];
        std::string acc = "a" + std::to_string(v);
        Accumulator A = accumulator(n);
        code += "    " + A.type + " " + acc + " = " + A.init + ";\n";
        // A float sum in double, in vector lanes: the order differs from the
        // interpreter's by far less than the f32 (or bf16) result's rounding.
        if (!A.integer && !A.max && n.type.dtype != DType::f64) code += "#pragma omp simd reduction(+:" + acc + ")\n";
        code += "    for (int64_t j = 0; j < " + C(D) + "; ++j) {\n";
        std::string xv = row_value(x, full, sp);
        code += "      " + acc + " = " + A.update(acc, xv) + ";\n";
        code += "    }\n";
        std::string var = "s" + std::to_string(v);
        code += "    const " + ty + " " + var + " = (" + ty + ")(" + acc + (n.op == Op::mean ? " / (double)" + C(D) : "") + ");\n";
        local_[v] = var;
        if (in_mem_[static_cast<size_t>(v)] || is_temp(v)) code += "    " + ptr(v) + "[row] = " + var + ";\n";
        continue;
      }
      if (reduce) {  // softmax, rms_norm, layer_norm as one op
        std::string rowvar = "w" + std::to_string(v);
        code += "    " + ty + "* " + rowvar + " = (" + ty + "*)(mine + " + std::to_string(scratch_slot++) + "LL*" + row_slot(D) + ");\n";
        code += composite_row(n, v, rowvar, full, sp, D);
        local_row_[v] = rowvar;
        if (in_mem_[static_cast<size_t>(v)] || is_temp(v))
          code += "    std::memcpy(" + ptr(v) + " + row*" + C(D) + ", " + rowvar + ", " + C(D * static_cast<int64_t>(dtype_size(n.type.dtype))) + ");\n";
        continue;
      }
      if (is_full) {
        std::string rowvar = "w" + std::to_string(v);
        code += "    " + ty + "* " + rowvar + " = (" + ty + "*)(mine + " + std::to_string(scratch_slot++) + "LL*" + row_slot(D) + ");\n";
        code += "#pragma omp simd\n    for (int64_t j = 0; j < " + C(D) + "; ++j) {\n";
        code += "      " + rowvar + "[j] = " + with_rows(n, full) + ";\n    }\n";
        local_row_[v] = rowvar;
        if (in_mem_[static_cast<size_t>(v)] || is_temp(v))
          code += "    std::memcpy(" + ptr(v) + " + row*" + C(D) + ", " + rowvar + ", " + C(D * static_cast<int64_t>(dtype_size(n.type.dtype))) + ");\n";
        continue;
      }
      // A per-row scalar ([..,1] or [..]).
      Idx own = sv.size() == sp.size() ? keep : oi;
      std::string var = "s" + std::to_string(v);
      code += "    const " + ty + " " + var + " = " + elementwise_or_gather(n, own) + ";\n";
      local_[v] = var;
      if (in_mem_[static_cast<size_t>(v)] || is_temp(v)) code += "    " + ptr(v) + "[row] = " + var + ";\n";
    }
    code += par ? close_parallel_loop() : "  }\n";
    local_.clear();
    local_row_.clear();
    return leading + code;
  }

  // Row scratch for a rowwise kernel: one double-sized row per op, at most,
  // each in a slot of row_slot(D) bytes. Returns the per-thread stride.
  std::string scratch_for(const Kernel& K, const Dim& D) {
    Dim ops(static_cast<int64_t>(K.ops.size()));
    out_.scratch_sizes.push_back(ops * (D * 8 + 64));  // covers each slot's rounding
    return "(" + C(ops) + "*" + row_slot(D) + ")";
  }
  static std::string row_slot(const Dim& D) {
    return D.is_const() ? C(Dim((D.value() * 8 + 63) / 64 * 64)) : "((" + C(D * 8) + "+63LL)/64LL*64LL)";
  }

  // The value of `x` at row position j: an in-kernel row, an in-kernel
  // per-row scalar, or a load.
  std::string row_value(ValueId x, const Idx& full, const Sizes& sp) {
    if (auto it = local_row_.find(x); it != local_row_.end()) return it->second + "[j]";
    if (auto it = local_.find(x); it != local_.end()) return it->second;
    return load(x, broadcast(x, sp, full));
  }

  // An elementwise op over the row, with in-kernel operands from registers/rows.
  std::string with_rows(const Node& n, const Idx& full) {
    std::map<ValueId, std::string> saved = local_;
    for (ValueId in : n.inputs)
      if (auto it = local_row_.find(in); it != local_row_.end()) local_[in] = it->second + "[j]";
    std::string e = elementwise_or_gather(n, full);
    local_ = saved;
    return e;
  }

  std::string composite_row(const Node& n, ValueId v, const std::string& out, const Idx& full, const Sizes& sp,
                            const Dim& D) {
    std::string ty = T(v), Ds = C(D);
    std::string x = row_value(n.inputs[0], full, sp);
    std::string c;
    if (n.op == Op::softmax) {
      c += "    { double m = -INFINITY, s = 0;\n";
      c += "      for (int64_t j = 0; j < " + Ds + "; ++j) m = std::max(m, (double)(" + x + "));\n";
      c += "      for (int64_t j = 0; j < " + Ds + "; ++j) { double e = std::exp((double)(" + x + ") - m); s += e; " + out + "[j] = (" + ty + ")e; }\n";
      c += "      for (int64_t j = 0; j < " + Ds + "; ++j) " + out + "[j] = (" + ty + ")((double)" + out + "[j] / s); }\n";
      // Note: the interpreter divides the double exponential; close to 1 ulp in f32.
      return c;
    }
    std::string w = row_value(n.inputs[1], full, sp);
    double eps = n.attr_float("eps");
    if (n.op == Op::rms_norm) {
      c += "    { double ss = 0;\n      for (int64_t j = 0; j < " + Ds + "; ++j) { double xv = " + x + "; ss += xv*xv; }\n";
      c += "      const double inv = 1.0 / std::sqrt(ss / (double)" + Ds + " + " + literal(eps, DType::f64) + ");\n";
      c += "      for (int64_t j = 0; j < " + Ds + "; ++j) " + out + "[j] = (" + ty + ")((" + x + ") * inv * (" + w + ")); }\n";
      return c;
    }
    std::string b = row_value(n.inputs[2], full, sp);
    c += "    { double mu = 0, var = 0;\n      for (int64_t j = 0; j < " + Ds + "; ++j) mu += " + x + ";\n      mu /= (double)" + Ds + ";\n";
    c += "      for (int64_t j = 0; j < " + Ds + "; ++j) { double d = (" + x + ") - mu; var += d*d; }\n";
    c += "      const double inv = 1.0 / std::sqrt(var / (double)" + Ds + " + " + literal(eps, DType::f64) + ");\n";
    c += "      for (int64_t j = 0; j < " + Ds + "; ++j) " + out + "[j] = (" + ty + ")(((" + x + ") - mu) * inv * (" + w + ") + (" + b + ")); }\n";
    return c;
  }

  // How a reduction accumulates: floats in double, integers exactly in int64
  // (wrapping, like the interpreter).
  struct Accumulator {
    std::string type, init;
    bool integer, max;
    std::string update(const std::string& acc, const std::string& x) const {
      if (integer) return max ? "std::max<int64_t>(" + acc + ", (int64_t)(" + x + "))" : "tj_iadd<int64_t>(" + acc + ", (int64_t)(" + x + "))";
      return max ? "tj_max<double>(" + acc + ", (double)(" + x + "))" : acc + " + (double)(" + x + ")";
    }
  };
  static Accumulator accumulator(const Node& n) {
    bool integer = is_int(n.type.dtype), max = n.op == Op::amax;
    if (integer) return {"int64_t", max ? "INT64_MIN" : "0", true, max};
    return {"double", max ? "-INFINITY" : "0", false, max};
  }

  // A reduction over any axes: accumulate every input element into its output.
  std::string reduction_body(const Kernel& K) {
    if (K.ops.size() != 1) throw Error("code generation: a reduction kernel with more than one op");
    ValueId v = K.ops[0];
    const Node& n = g_.node(v);
    ValueId x = n.inputs[0];
    auto sx = shape(x);
    const auto& axes = n.attr_ints("axes");
    Sizes kept = sx;
    for (int64_t a : axes) kept[static_cast<size_t>(a)] = 1;
    Dim outn = count(kept), per = div(count(sx), outn);
    std::string ty = T(v);
    // Accumulators live in the (first thread's) scratch: no allocation per call.
    (void)scratch(outn * 8 + 8);
    Accumulator A = accumulator(n);
    std::string code = "  " + A.type + "* acc = (" + A.type + "*)t[" + std::to_string(g_.size()) + "];\n";
    code += "  for (int64_t o = 0; o < " + C(outn) + "; ++o) acc[o] = " + A.init + ";\n";
    Idx iv = loop_vars(sx.size());
    Idx ko = iv;
    for (int64_t a : axes) ko[static_cast<size_t>(a)] = "0";
    std::string slot = "acc[" + flat(ko, kept) + "]";
    std::string upd = slot + " = " + A.update(slot, load(x, iv)) + ";\n";
    code += loops(sx, iv, "  " + upd, false);
    code += "  for (int64_t o = 0; o < " + C(outn) + "; ++o) " + ptr(v) + "[o] = (" + ty + ")(acc[o]" +
            (n.op == Op::mean ? " / (double)" + C(per) : "") + ");\n";
    return code;
  }

  void emit_output(size_t i) {
    ValueId o = g_.outputs()[i];
    auto so = shape(o);
    Idx iv = loop_vars(so.size(), "o");
    std::string name = "tj_output_" + std::to_string(i);
    local_.clear();
    used_.clear();
    std::string body = loops(so, iv, "  ((" + T(o) + "*)dst)[" + flat(iv, so) + "] = " + load(o, iv) + ";\n");
    out_.source += "void " + name + "(void** t, void* dst) {\n" + pointers() + body + "}\n\n";
    out_.output_symbols.push_back(name);
  }

  // A free gather (indices computed from inputs alone) is read only where a
  // consumer reads it, and a consumer may read none of it (an empty slice
  // of it): every index is checked once per call, before the kernels, as the
  // interpreter checks it (unless the gather has no element at all).
  void emit_index_checks() {
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
    out_.source += "void tj_check_indices(void** t) {\n" + pointers() + body + "}\n\n";
    out_.check_symbol = "tj_check_indices";
  }

  const Graph& g_;
  const Schedule& s_;
  std::vector<bool> in_mem_;
  std::set<ValueId> temp_;
  std::set<ValueId> used_;  // pointers the function being emitted uses
  int current_kernel_ = 0;
  SymEnv hint_;
  std::map<ValueId, std::string> local_, local_row_;
  int64_t team_work_ = 0;         // elements of work the current kernel splits over the team (0: it does not)
  int64_t team_work_total_ = 0;
  EmittedProgram out_;
};

}  // namespace

EmittedProgram emit_cpp(const Graph& g, const Schedule& s, const SymEnv& hint) { return Emitter(g, s, hint).run(); }

TemporaryLayout lay_out_temporaries(const EmittedProgram& p, const SymEnv& sizes) {
  TemporaryLayout l;
  int kernel = -1;
  int64_t cursor = 0;
  for (size_t i = 0; i < p.temporaries.size(); ++i) {
    if (p.temporary_kernel[i] != kernel) kernel = p.temporary_kernel[i], cursor = 0;
    l.offsets.push_back(cursor);
    cursor += (p.temporary_sizes[i].eval(sizes) + 63) / 64 * 64;
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
