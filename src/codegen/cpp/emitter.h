// The C++ emitter's working state, internal to src/codegen/cpp: one Emitter
// per program, built on the value reading every target shares
// (codegen/value_reader.h: views, gathers, op expressions, temporaries), as
// the GPU emitter is. Its methods are split by what they emit: prelude.cpp
// the text every program starts with; emit.cpp the program (pointer table,
// loops, the pool, the dispatch by kernel kind, outputs, index checks);
// stores.cpp writes concat, kv_write and scatter_add; kernels/ has one file
// per kernel kind (pointwise, rowwise, reduction, matmul with the GEMVs,
// conv, attention, and attention's backward). A kind reads the kernel and this
// state and returns its body.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codegen/abi.h"
#include "codegen/cpp/emit.h"
#include "codegen/row_form.h"
#include "codegen/value_reader.h"

namespace tj::cpp {

// The C-family text every target shares (codegen/c_text.h).
using namespace codegen;

namespace conv_kernels {
struct Plane;  // kernels/conv_common.h
}

// src/support/minifloat.h and codegen/abi.h, as text (embedded by
// cmake/embed_text.cmake).
extern const char* const kMinifloatText;
extern const char* const kAbiText;

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

class Emitter : public codegen::ValueReader {
 public:
  Emitter(const Graph& g, const Schedule& s, const SymEnv& hint, bool tune = false) : ValueReader(g, s, hint), tune_(tune) {}
  EmittedProgram run();

 protected:
  // ---- the thread pool -----------------------------------------------------
  // Generated code runs parallel work as parts on the process's pool
  // (src/runtime/thread_pool.h): a lambda called as (tj_part, tj_parts,
  // tj_thread), where tj_thread (< the pool's threads) indexes scratch.
  std::string pool() const { return slot(tj_slot_runtime); }
  // t[n + s]: the table's slot s (codegen/abi.h), as generated code names it.
  std::string slot(tj_table_slot s) const;
  static std::string close_parallel() { return "});\n"; }
  std::string split_parts() const { return std::to_string(kPartsPerThread) + "*tj_threads(" + pool() + ")"; }
  static std::string close_parallel_loop() { return "}\n" + close_parallel(); }
  bool is_temp(ValueId v) const { return temp_.count(v) > 0; }

  // ---- stores.cpp: concat, kv_write, scatter_add
  std::string store(ValueId v);
  std::string scatter_add(ValueId v);
  std::string concat_last(ValueId v);
  // Concat K.ops[i] as rows (ValueReader::concat_rows), with the ops
  // [i + 1, end) computed in the same pass.
  std::string concat_pass(const Kernel& K, size_t i, size_t end);
  bool concat_rows_streamed() const override { return true; }
  std::string row_pass(const Sizes& so, const std::string& head, const std::string& body);

  // ---- emit.cpp: the program, elementwise ops, loops, the pool, temporaries, kernels, outputs
  std::string pointers();
  // The same declarations read through the slot list tj_buf (a kernel's code
  // shared by kernels alike, emit_function): the slots, in order, in *slots.
  std::string pointers_through_slots(std::vector<ValueId>* slots);
  static std::string prelude();         // prelude.cpp
  static std::string embedded(const char* header_text);  // prelude.cpp
  std::string op_helpers() const;
  std::string loops(const Sizes& sh, const Idx& vars, const std::string& body, bool allow_parallel = true,
                    bool simd = true, bool columns = false);
  std::string open_parallel(const std::string& parts) const;
  std::string open_parallel_loop(const std::string& var, const std::string& n, bool simd) const;
  std::string name_of(int k) const;
  void emit_kernel(int k);
  // The kernel's function under `name` with the current knobs_; returns its
  // team work (units it splits over the team, 0: none).
  int64_t emit_function(int k, const std::string& name);
  std::string scratch(const Dim& bytes);
  // `value` read at run time from the kernel's list of its own (tj_k), not
  // written into its code: kernels that differ only in such values (the
  // input channels of densenet's 1x1 convs, one more layer's features each)
  // are alike and share one function, compiled once. For sizes where a
  // constant buys nothing (a stride or a count passed on to a helper).
  std::string lift(int64_t value);
  void make_temp_copy(ValueId x, std::string* code);
  void emit_output(size_t i);
  void emit_index_checks();

  // ---- kernels/pointwise.cpp
  std::string pointwise_body(const Kernel& K, size_t first, bool columns = false);
  std::string pointwise_statements(const Kernel& K, size_t first, const Idx& iv, const Sizes& sp, const std::string& at);
  void append_statement(ValueId v, const Idx& iv, const Sizes& sp, const std::string& at, std::string* inner, std::string* stores);

  // ---- kernels/rowwise.cpp
  std::string rowwise_body(const Kernel& K);
  std::string scratch_for(const Kernel& K, const Dim& D);
  static std::string row_slot(const Dim& D);
  std::string composite_row(const Node& n, ValueId v, const std::string& out, const Idx& full, const Sizes& sp,
                            const Dim& D);

  // ---- kernels/reduction.cpp
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
  // How a GEMV reads B's elements: as the product's type, or stored narrower
  // (quantize_weights: bf16 bits, int8) and converted in registers.
  struct WeightRead {
    std::string type;       // B's C type as read; empty: the product's
    std::string pre, post;  // around an element read: its conversion
    std::string vector;     // a function reading 16 of them as a tj_vf16 ("": none)
    // Rows of B per pass over the accumulator: more for narrower weights, so
    // that the accumulator's traffic stays below the weights'.
    int rows = 4;
    // int8 packed in blocks of 16 columns (quantize_weights): [N/16, K, 16].
    bool packed = false;
    std::string at(const std::string& e) const { return pre + e + post; }
  };
  static std::string narrow_weight_helpers();
  static std::string row_pointers(const std::string& ty, const std::string& wt, const std::string& lds, int R, const std::string& at);
  // acc[j] += a0*r0[j] + ... + a<rows-1>*r<rows-1>[j] over [j0, j1): 16 at a
  // time with w.vector (each weight converted in a vector register), then
  // one at a time; or one `#pragma omp simd` loop.
  static std::string rows_into(const WeightRead& w, int rows, const std::string& j0, const std::string& j1, const std::string& at);
  // B = cast(w) of a constant w in bf16 or int8: how to read w, and w.
  std::optional<std::pair<WeightRead, ValueId>> narrow_weights(ValueId b) const;
  std::string transposed_rows(const std::string& Ks, const std::string& lds, const std::string& n_end);
  std::string gemv_columns(DType dtype, const std::string& x, const std::string& B, bool transposed, const Dim& ldb,
                           const std::string& y, const Dim& K, const Dim& N, const WeightRead& w);
  // y[n0, n1) of y[N] = x[K] @ B for B packed ([N/16, K, 16] int8): each
  // block of 16 columns one contiguous stream, summed in registers.
  static std::string gemv_packed(const std::string& x, const std::string& B, const std::string& y, const Dim& K);
  static std::string packed_columns_of(const Dim& N);
  std::string loop_matmul(const Kernel& K);
  std::string store_row(ValueId v, const std::string& rowvar, const Dim& D);
  std::string gemv(const std::string& ty, const std::string& x, const std::string& B, bool transposed, const Dim& ldb,
                   const std::string& y, const Dim& K, const Dim& N, const WeightRead& w);

  // ---- kernels/conv.cpp
  std::string dense_operand(ValueId x, std::string* code);
  std::string conv_body(const Kernel& K);
  std::string conv_channels_last_body(const Kernel& K);
  // kernels/conv_library.cpp: the conv `d` by the matrix library
  // (runtime/library_conv.h), a channels-last conv's form by rule or as a
  // tuning candidate.
  // Its geometry, where the library takes the channels-last conv K[0]:
  // any group count whose weights the generated kernels take, 1 or 2 spatial dims (Plane pl), not Winograd,
  // weights stored (a constant or a param), x dense or `view`, and an
  // epilogue of at most the bias, a residual added and a ReLU or a clip
  // (bits as tj_conv_tile_cl's EP: 1 bias, 2 ReLU, 4 clip to [lo, hi]) or
  // none.
  std::optional<tj_conv_desc> library_conv_desc(const Kernel& K, const conv_kernels::Plane& pl, const std::optional<Strided>& view, int bits, float lo,
                                                float hi, bool residual);
  // Where the library makes no plan, `otherwise` runs (the generated form).
  // r: the residual's pointer, or empty.
  std::string conv_library_call(const tj_conv_desc& d, const std::string& x, const std::string& w, const std::string& b, const std::string& r,
                                const std::string& y, const std::string& otherwise);
  std::string pool_body(const Kernel& K);
  static std::string pool_helpers();  // kernels/pool.cpp
  std::string pool_epilogue(const Kernel& K, const std::string& var, int64_t n, const Idx& at);
  static std::string direct_conv_helpers();         // kernels/conv.cpp
  static std::string channels_last_conv_helpers();  // kernels/conv_channels_last_helpers.cpp

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
  static std::string value_rows_in_registers(int64_t U, int64_t Dv);
  static std::string attention_one_query(const AttentionForm& f, const std::string& S, const std::string& D, int64_t Dv);
  static std::string attention_row_block(const AttentionForm& f, const std::string& rows, const std::string& S, int64_t H, int64_t group,
                                         int64_t D, int64_t Dv, int64_t qb);
  static std::string block_dots(const std::string& ty, const std::string& st, const std::string& row, const std::string& kt,
                                const std::string& dst, const std::string& Ds, const std::string& at);
  // ---- kernels/attention_grad.cpp: attn_lse, attn_dq, attn_dkv
  Rows rows_of(ValueId x, std::string* code);
  std::string attention_grad_body(const Kernel& K);

  // ---- autotuning: the knobs a kernel's schedule could be set by. The
  // code that takes a decision by rule lists, when tuning, the candidates
  // (the rule's own first) in alternatives_, and reads knobs_.
  struct Knobs {
    int gemv_rows = 0;              // weight rows per pass over the accumulator (0: the format's)
    bool gemv_columns = false;      // a large GEMV split over columns, not over K into partial sums
    int attention_query_block = 0;  // rows that share a block of keys (1: one query at a time; 0: the rule's)
    int attention_key_block = 0;    // keys per block of the online softmax (0: 64)
    std::string label;
    bool conv_library = false;      // a channels-last conv by the matrix library (conv_library_call)
  };

  bool uses_pool_ = false;             // some pool kernel: the prelude gets tj_pool_cl
  bool uses_direct_conv_ = false;      // some conv kernel is the direct form: the prelude gets tj_conv_tile
  bool reads_narrow_weights_ = false;  // some GEMV reads bf16 or int8 weights: the prelude gets their helpers
  int64_t team_work_ = 0;         // elements of work the current kernel splits over the team (0: it does not)
  int64_t team_work_total_ = 0;
  bool tune_ = false;
  Knobs knobs_;
  std::vector<Knobs> alternatives_;
  std::string tuning_signature_;  // what alternatives_ are schedules of
  // Kernel code emitted so far, keyed by its text with value names made
  // positional: the function that holds it. Kernels alike (resnet's repeated
  // blocks, a transformer's layers) are one function, compiled once.
  std::map<std::string, std::string> bodies_;
  std::vector<int64_t> lifted_;  // the current kernel's tj_k
  // A function whose code reads sizes from tj_k (lift): where it lies in
  // the source, the sizes its first kernel passed, and whether every kernel
  // that calls it passes the same. Where they do, run() writes them into
  // its code as constants (unlift): GCC then folds them into the addresses,
  // where a size read at run time kept one pointer per position of a
  // register tile and spilled them.
  struct LiftedBody {
    std::map<std::string, std::string>::iterator body;
    size_t begin, end;
    std::vector<int64_t> values;
    bool same = true;
  };
  std::vector<LiftedBody> lifted_bodies_;
  void unlift();
};

}  // namespace tj::cpp
