// What every target's emitter shares, internal to src/codegen: a graph's
// values read inside a kernel as C-family expressions. Views are strided
// reads or index arithmetic (numpy's no-copy reshape included), operands
// broadcast, generators and splat constants are computed in place, gathers
// are bounds-checked (views.cpp); an op's value is its row's expression
// (value_reader.cpp); kernel-local values that must be in memory become
// temporaries of the program's layout.
//
// The C++ emitter (codegen/cpp/emitter.h) and the GPU emitter
// (codegen/gpu/emitter.h) are siblings built on this: each adds its own
// program, loops and kernel bodies, and spells two things its own way (a
// narrow float read from memory; the op row's expression it prints).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codegen/c_text.h"
#include "codegen/program.h"
#include "codegen/row_form.h"
#include "schedule/fusion.h"

namespace tj::codegen {

class ValueReader {
 public:
  ValueReader(const Graph& g, const Schedule& s, const SymEnv& hint);
  virtual ~ValueReader() = default;

 protected:
  // ---- what each target spells its own way
  // An element of a narrow float (f16, bf16) read from memory, as a float.
  virtual std::string read_narrow(DType, const std::string& e) const { return "((float)" + e + ")"; }
  // A pointwise op's expression (its row's C++, or GPU C).
  virtual CExprFn expression(const OpDef& d) const { return d.c_expr; }

  Sizes shape(ValueId v) const { return g_.type(v).shape; }
  // A size's value for decisions (parallel or not, team or not): at the hint.
  int64_t hint(const Dim& d) const { return d.eval(hint_); }
  // Whether gather indices `ind` are known at compile time to lie in
  // [0, len) (constants, and integer arithmetic on them: views, +, -, *,
  // max, min): read without the bounds check and the wrap of negative ones.
  bool indices_in_range(ValueId ind, const Dim& len) const;
  std::string T(ValueId v) const { return ctype(g_.type(v).dtype); }          // in memory
  std::string CT(ValueId v) const { return compute_ctype(g_.type(v).dtype); }  // in registers
  bool is_temp(ValueId v) const { return temp_.count(v) > 0; }
  // Value v's buffer ("p<v>"), noted as used by the function being emitted.
  std::string ptr(ValueId v);
  static DType check_dtype(DType t);

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
  static Accumulator accumulator(const Node& n);

  // Each input of concat v, its index (loop variables c0..) and the
  // result's index it is stored at.
  struct ConcatPart {
    ValueId input;
    Idx at, into;
  };
  std::vector<ConcatPart> concat_parts(ValueId v) const;

  // Concat K.ops[i] as a pass over rows (a target that says so in
  // concat_rows_streamed): along the last axis of a pointwise kernel, every
  // input a contiguous buffer (or a view that reads as one) of a type read
  // as it is stored, so that a table of their runs drives one loop. The
  // kernel's elementwise ops after it, up to the next store, run in that
  // pass over the concat's elements as they are read: all of them, each
  // over its space and reading it at its own index (else the concat is not
  // streamed); `end` is one past them. The concat is then in memory only
  // where something else needs it (densenet's concats fed only their batch
  // norm, written and read back per layer).
  struct ConcatRows {
    size_t end = 0;
  };
  std::optional<ConcatRows> concat_rows(const Kernel& K, size_t i) const;
  virtual bool concat_rows_streamed() const { return false; }
  // The current kernel's streamed concats, as plan_temporaries decided
  // them: op index -> ConcatRows::end (what pointwise_body emits so).
  std::map<size_t, size_t> streamed_;

  // An operand read as rows of a contiguous last dim: its base pointer and
  // strides per dim (the attention kernels' operands).
  struct Rows {
    std::string p;                     // the base pointer, offset applied
    std::vector<std::string> strides;  // per dim ("0" where it is 1: broadcast); the last is 1
  };
  // Operand x as rows: through its view where the last dim is contiguous,
  // else copied into its temporary by the target's `copy` first.
  Rows as_rows(ValueId x, const std::function<void(ValueId)>& copy);

  // ---- views.cpp: reading values through views, generators and gathers
  Idx broadcast(ValueId o, const Sizes& out, const Idx& idx) const;
  Idx reshape_index(const Idx& idx, const Sizes& so, const Sizes& sx) const;
  std::string load(ValueId o, const Idx& idx);
  std::string load_gather(const Node& n, const Idx& idx);
  std::optional<Strided> strided(ValueId o) const;
  static std::optional<Sizes> reshaped_strides(const Sizes& si, const Sizes& strides, const Sizes& so);

  // ---- value_reader.cpp: an op's value, temporaries
  std::string elementwise(const Node& n, const Idx& idx);
  std::string elementwise_or_gather(const Node& n, const Idx& idx);
  void make_temp(ValueId v);
  // The values of kernel k that must be in memory (read through a view,
  // stored, used past a store, written by a library call).
  void plan_temporaries(const Kernel& K, int k);

  // ---- a row-wise kernel's values (per row: j indexes the row's elements)
  std::string row_value(ValueId x, const Idx& full, const Sizes& sp);
  std::string with_rows(const Node& n, const Idx& full);
  RowOperands row_operands(const Node& n, const std::string& out, const Idx& full, const Sizes& sp, const Dim& D);

  const Graph& g_;
  const Schedule& s_;
  std::vector<bool> in_mem_;
  std::set<ValueId> temp_;
  std::set<ValueId> used_;  // pointers the function being emitted uses
  int current_kernel_ = 0;
  SymEnv hint_;
  std::map<ValueId, std::string> local_, local_row_;
  mutable std::map<std::pair<ValueId, int64_t>, bool> in_range_;  // indices_in_range's answers: it may scan a constant
  EmittedProgram out_;
};

}  // namespace tj::codegen
