// The C++ emitter's working state, internal to src/codegen/cpp: one Emitter
// per program. Its methods are split by what they emit: emit.cpp has the
// program (prelude, pointer table, elementwise ops, loops, the pool,
// temporaries, the dispatch by kernel kind, outputs, index checks);
// views.cpp reads values through views and gathers; kernels/ has one file per
// kernel kind (pointwise, rowwise, reduction, matmul with the GEMVs, and
// attention). A kind reads the kernel and this state and returns its body.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codegen/cpp/emit.h"

namespace tj::cpp {

using Idx = std::vector<std::string>;
// Sizes are Dims: constants, or polynomials over the graph's size symbols,
// which generated code reads at run time (C() prints them).
using Sizes = std::vector<Dim>;

constexpr int64_t kParallelElements = int64_t{1} << 15;  // below this a fork/join costs more than it saves
constexpr int64_t kAttentionQueryBlock = 32;             // rows (query, head) that share each transposed block of keys
constexpr int64_t kGemvParallelElements = int64_t{1} << 18;  // a GEMV reading fewer weights stays on one thread
constexpr int64_t kTeamSplitElements = int64_t{1} << 12;  // a small GEMV or attention splits from here...
constexpr int64_t kTeamElements = int64_t{1} << 16;       // ...when the program's small splits add up to this
constexpr int kGemvPartials = 8;    // a large GEMV over [K, N] weights sums this many partial results
// A matmul of at least kSplitMatmul multiply-adds splits over output columns
// into blocks whose count depends on N alone (see tj_matmul_blocks in the
// preamble): results do not depend on the thread count.
constexpr int64_t kSplitMatmul = int64_t{1} << 17;
constexpr int kPartsPerThread = 4;  // parts per pool thread of a split loop: late threads leave less undone

// A dtype's C type in memory; f16 and bf16 are 16-bit structs (tj_f16,
// tj_bf16) that convert to and from float.
std::string ctype(DType t);
// The type values of a dtype are computed in: float for f16 and bf16.
std::string compute_ctype(DType t);
inline bool is_half(DType t) { return t == DType::f16 || t == DType::bf16; }
// `expr` (a float) rounded to `t` when t is f16 or bf16, as the interpreter
// rounds each op's result; `expr` itself otherwise.
std::string rounded(const std::string& expr, DType t);
std::string literal(double v, DType t);
Sizes contiguous_strides(const Sizes& s);
Dim count(const Sizes& s);
// a / b, exact (sizes divide evenly where the emitter divides them).
Dim div(const Dim& a, const Dim& b);
// The C name of size symbol `s`.
std::string sym_name(const std::string& s);
// A size as a C expression ("128LL", "(2LL*tj_sym_S+1LL)").
std::string C(const Dim& d);
// The index of flat position `f` in an array of `shape`, and back.
Idx unflat(const std::string& f, const Sizes& shape);
std::string flat(const Idx& idx, const Sizes& shape);
Idx loop_vars(size_t rank, const std::string& prefix = "i");

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
        if (s.writes_in_place(v)) in_mem_[static_cast<size_t>(v)] = true;  // it is its cache
    }
  }
  EmittedProgram run();

 private:
  Sizes shape(ValueId v) const { return g_.type(v).shape; }
  // A size's value for decisions (parallel or not, team or not): at the hint.
  int64_t hint(const Dim& d) const { return d.eval(hint_); }
  std::string T(ValueId v) const { return ctype(g_.type(v).dtype); }  // in memory
  std::string CT(ValueId v) const { return compute_ctype(g_.type(v).dtype); }  // in registers
  // ---- the thread pool -----------------------------------------------------
  // Generated code runs parallel work as parts on the process's pool
  // (src/runtime/thread_pool.h): a lambda called as (tj_part, tj_parts,
  // tj_thread), where tj_thread (< the pool's threads) indexes scratch.
  std::string pool() const { return "t[" + std::to_string(g_.size() + 1) + "]"; }
  static std::string close_parallel() { return "});\n"; }
  std::string split_parts() const { return std::to_string(kPartsPerThread) + "*tj_threads(" + pool() + ")"; }
  static std::string close_parallel_loop() { return "}\n" + close_parallel(); }
  bool is_temp(ValueId v) const { return temp_.count(v) > 0; }
  // How a reduction accumulates: floats in double, integers exactly in int64
  // (wrapping, like the interpreter).
  struct Accumulator {
    std::string type, init;
    bool integer, max, prod = false;
    std::string update(const std::string& acc, const std::string& x) const {
      if (integer)
        return max    ? "std::max<int64_t>(" + acc + ", (int64_t)(" + x + "))"
               : prod ? "tj_imul<int64_t>(" + acc + ", (int64_t)(" + x + "))"
                      : "tj_iadd<int64_t>(" + acc + ", (int64_t)(" + x + "))";
      return max ? "tj_max<double>(" + acc + ", (double)(" + x + "))" : acc + (prod ? " * " : " + ") + "(double)(" + x + ")";
    }
  };

  // ---- views.cpp: reading values through views, generators and gathers
  Idx broadcast(ValueId o, const Sizes& out, const Idx& idx) const;
  Idx reshape_index(const Idx& idx, const Sizes& so, const Sizes& sx) const;
  std::string load(ValueId o, const Idx& idx);
  std::string load_gather(const Node& n, const Idx& idx);
  std::optional<Strided> strided(ValueId o) const;
  static std::optional<Sizes> reshaped_strides(const Sizes& si, const Sizes& strides, const Sizes& so);

  // ---- emit.cpp: the program, elementwise ops, loops, the pool, temporaries, kernels, outputs
  static DType check_dtype(DType t);
  std::string ptr(ValueId v);
  std::string pointers();
  static std::string prelude();
  std::string op_helpers() const;
  std::string elementwise(const Node& n, const Idx& idx);
  std::string loops(const Sizes& sh, const Idx& vars, const std::string& body, bool allow_parallel = true,
                    bool simd = true, bool columns = false);
  std::string open_parallel(const std::string& parts) const;
  std::string open_parallel_loop(const std::string& var, const std::string& n, bool simd) const;
  void make_temp(ValueId v);
  void plan_temporaries(const Kernel& K, int k);
  std::string name_of(int k) const;
  void emit_kernel(int k);
  std::string elementwise_or_gather(const Node& n, const Idx& idx);
  std::string store(ValueId v);
  std::string scratch(const Dim& bytes);
  void make_temp_copy(ValueId x, std::string* code);
  void emit_output(size_t i);
  void emit_index_checks();

  // ---- kernels/pointwise.cpp
  std::string pointwise_body(const Kernel& K, size_t first, bool columns = false);

  // ---- kernels/rowwise.cpp
  std::string rowwise_body(const Kernel& K);
  std::string scratch_for(const Kernel& K, const Dim& D);
  static std::string row_slot(const Dim& D);
  std::string row_value(ValueId x, const Idx& full, const Sizes& sp);
  std::string with_rows(const Node& n, const Idx& full);
  std::string composite_row(const Node& n, ValueId v, const std::string& out, const Idx& full, const Sizes& sp,
                            const Dim& D);

  // ---- kernels/reduction.cpp
  static Accumulator accumulator(const Node& n);
  std::string reduction_body(const Kernel& K);

  // ---- kernels/matmul.cpp
  struct BlasOperand {
    std::string p;  // pointer expression
    bool trans = false;
    Dim ld = 1;
    Sizes batch_strides;
  };
  BlasOperand blas_operand(ValueId x, const Dim& rows, const Dim& cols, std::string* code);
  std::string matmul_body(const Kernel& K);
  static std::string columns_of(const Dim& N);
  std::string gemv_columns(DType dtype, const std::string& x, const std::string& B, bool transposed, const Dim& ldb,
                           const std::string& y, const Dim& K, const Dim& N);
  std::string loop_matmul(const Kernel& K);
  std::string store_row(ValueId v, const std::string& rowvar, const Dim& D);
  std::string gemv(const std::string& ty, const std::string& x, const std::string& B, bool transposed, const Dim& ldb,
                   const std::string& y, const Dim& K, const Dim& N);

  // ---- kernels/attention.cpp
  // What one flash_attn asks beyond plain attention: the element type, a
  // causal limit, an added bias (read as `bias` with strides sb0..sb3 over
  // batch, head, query, key), 0 rather than NaN for rows with no key.
  struct AttentionForm {
    std::string ty, st;  // compute and storage types (float and tj_bf16 for bf16)
    bool causal = false, bias = false, zero_empty = false;
    bool bias_keys_contiguous = false;  // sb3 is 1
  };
  std::string attention_body(const Kernel& K);
  static std::string attention_one_query(const AttentionForm& f, const std::string& S, const std::string& D, int64_t Dv);
  static std::string attention_row_block(const AttentionForm& f, const std::string& rows, const std::string& S, int64_t H, int64_t group,
                                         int64_t D, int64_t Dv, int64_t qb);

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

}  // namespace tj::cpp
