// The C++ emitter's rowwise kernels: a loop over rows, row-space ops in per-
// thread row scratch, reductions and per-row ops as scalars.
#include "codegen/cpp/emitter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "codegen/row_form.h"
#include "tensorjit/error.h"

namespace tj::cpp {

// A loop over rows; full-row ops into per-thread scratch rows, reductions
// and per-row ops as scalars.
std::string Emitter::rowwise_body(const Kernel& K) {
  Sizes sp = K.space;
  Dim D = sp.back();
  Sizes outer(sp.begin(), sp.end() - 1);
  Dim rows = count(outer);
  std::string code;
  code += "  const int64_t scratch = " + scratch_for(K, D) + ";\n";
  bool par = hint(count(sp)) >= kParallelElements && hint(rows) > 1;
  code += par ? open_parallel_loop("row", C(rows), false) : "  for (int64_t row = 0; row < " + C(rows) + "; ++row) {\n";
  code += "    char* mine = (char*)" + slot(tj_slot_scratch) + " + (int64_t)" + (par ? "tj_thread" : "0") + " * scratch;\n    (void)mine;\n";
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
    std::string ty = CT(v);
    bool is_full = sv == sp;
    bool reduce = n.def().fuse == Fuse::reduction || n.def().fuse == Fuse::rowwise;
    if (n.def().fuse == Fuse::store) {
      leading += store(v);
      continue;
    }
    if (n.def().fuse == Fuse::reduction) {
      // A last-axis reduction of an in-kernel row or an external operand.
      ValueId x = n.inputs[0];
      std::string acc = "a" + std::to_string(v);
      Accumulator A = accumulator(n);
      code += "    " + A.type + " " + acc + " = " + A.init + ";\n";
      // A float sum in double, in vector lanes: the order differs from the
      // interpreter's by far less than the f32 (or bf16) result's rounding.
      if (!A.integer && !A.max && !A.prod && n.type.dtype != DType::f64) code += "#pragma omp simd reduction(+:" + acc + ")\n";
      code += "    for (int64_t j = 0; j < " + C(D) + "; ++j) {\n";
      std::string xv = row_value(x, full, sp);
      code += "      " + acc + " = " + A.update(acc, xv) + ";\n";
      code += "    }\n";
      std::string var = "s" + std::to_string(v);
      code += "    const " + ty + " " + var + " = " +
              rounded("(" + ty + ")(" + acc + (n.op == Op::mean ? " / (double)" + C(D) : "") + ")", n.type.dtype) + ";\n";
      local_[v] = var;
      if (in_mem_[static_cast<size_t>(v)] || is_temp(v)) code += "    " + ptr(v) + "[row] = " + var + ";\n";
      continue;
    }
    if (reduce) {  // softmax, rms_norm, layer_norm as one op
      std::string rowvar = "w" + std::to_string(v);
      code += "    " + ty + "* " + rowvar + " = (" + ty + "*)(mine + " + std::to_string(scratch_slot++) + "LL*" + row_slot(D) + ");\n";
      code += composite_row(n, v, rowvar, full, sp, D);
      if (is_narrow_float(n.type.dtype))  // the composite's result rounded, as the interpreter's
        code += "    for (int64_t j = 0; j < " + C(D) + "; ++j) " + rowvar + "[j] = " + rounded(rowvar + "[j]", n.type.dtype) + ";\n";
      local_row_[v] = rowvar;
      if (in_mem_[static_cast<size_t>(v)] || is_temp(v)) code += store_row(v, rowvar, D);
      continue;
    }
    if (is_full) {
      std::string rowvar = "w" + std::to_string(v);
      code += "    " + ty + "* " + rowvar + " = (" + ty + "*)(mine + " + std::to_string(scratch_slot++) + "LL*" + row_slot(D) + ");\n";
      code += "#pragma omp simd\n    for (int64_t j = 0; j < " + C(D) + "; ++j) {\n";
      code += "      " + rowvar + "[j] = " + with_rows(n, full) + ";\n    }\n";
      local_row_[v] = rowvar;
      if (in_mem_[static_cast<size_t>(v)] || is_temp(v)) code += store_row(v, rowvar, D);
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

// Row `row` of v from its scratch row (in the compute type): a copy, or
// element by element through f16/bf16's conversion.
std::string Emitter::store_row(ValueId v, const std::string& rowvar, const Dim& D) {
  DType dt = g_.type(v).dtype;
  if (is_narrow_float(dt)) return "    for (int64_t j = 0; j < " + C(D) + "; ++j) " + ptr(v) + "[row*" + C(D) + " + j] = " + rowvar + "[j];\n";
  return "    std::memcpy(" + ptr(v) + " + row*" + C(D) + ", " + rowvar + ", " + C(D * static_cast<int64_t>(dtype_size(dt))) + ");\n";
}

// Row scratch for a rowwise kernel: one double-sized row per op, at most,
// each in a slot of row_slot(D) bytes. Returns the per-thread stride.
std::string Emitter::scratch_for(const Kernel& K, const Dim& D) {
  Dim ops(static_cast<int64_t>(K.ops.size()));
  out_.scratch_sizes.push_back(ops * (D * 8 + 64));  // covers each slot's rounding
  return "(" + C(ops) + "*" + row_slot(D) + ")";
}

std::string Emitter::row_slot(const Dim& D) {
  return D.is_const() ? C(Dim((D.value() * 8 + 63) / 64 * 64)) : "((" + C(D * 8) + "+63LL)/64LL*64LL)";
}

// A Fuse::rowwise op's row: its RowForm (the op's row, ir/op.h) printed as
// sequential loops over the row, statistics in double.
std::string Emitter::composite_row(const Node& n, ValueId v, const std::string& out, const Idx& full, const Sizes& sp,
                          const Dim& D) {
  const RowForm& form = codegen::row_form(n, "the C++ backend");
  const std::string ty = CT(v);
  const codegen::RowOperands o = row_operands(n, out, full, sp, D);
  std::string c = "    {\n";
  for (const RowPass& p : form.passes) {
    if (p.stat) c += "      " + codegen::row_stat(p) + "\n";
    const std::string body = codegen::row_pass_body(p, o, out, ty, "std::max");
    c += "      for (int64_t j = 0; j < " + C(D) + "; ++j) { " + body + "}\n";
    if (p.after) c += "      " + codegen::row_expr(p.after, o) + "\n";
  }
  return c + "    }\n";
}

}  // namespace tj::cpp
