// The GPU emitter's rowwise kernels: a work-group per row. Work-item l takes
// the row's elements l, l + G, l + 2G, ..., in every loop, so a row-space op
// reads only what the same work-item wrote (no barrier); reductions over the
// row meet in work-group memory.
#include "codegen/gpu/emitter.h"

#include "tensorjit/error.h"

namespace tj::gpu {

std::string Emitter::update(const Accumulator& A, const std::string& acc, const std::string& x) {
  if (A.integer)
    return (A.max ? "tj_smax_int64_t(" : A.prod ? "tj_imul_int64_t(" : "tj_iadd_int64_t(") + acc + ", (int64_t)(" + x + "))";
  return A.max ? "tj_max_double(" + acc + ", (double)(" + x + "))" : acc + (A.prod ? " * " : " + ") + "(double)(" + x + ")";
}

// Every work-item's `acc` combined by `op` (a function of two accumulators'
// names, "$a" and "$b") into acc, the same in each.
std::string Emitter::group_reduce(const std::string& acc, bool integer, const std::string& op, std::vector<std::string>* locals) const {
  const std::string red = integer ? "tj_redi" : "tj_red";
  const std::string decl = std::string(integer ? "int64_t " : "double ") + red + "[" + std::to_string(kRowGroup) + "]";
  if (std::find(locals->begin(), locals->end(), decl) == locals->end()) locals->push_back(decl);
  auto combine = [&](const std::string& a, const std::string& b) {
    std::string r = op;
    for (size_t at; (at = r.find("$a")) != std::string::npos;) r.replace(at, 2, a);
    for (size_t at; (at = r.find("$b")) != std::string::npos;) r.replace(at, 2, b);
    return r;
  };
  std::string c = "    " + red + "[tj_lid] = " + acc + ";\n    tj_barrier();\n";
  c += "    for (int w = " + std::to_string(kRowGroup / 2) + "; w > 0; w >>= 1) {\n";
  c += "      if (tj_lid < w) " + red + "[tj_lid] = " + combine(red + "[tj_lid]", red + "[tj_lid + w]") + ";\n      tj_barrier();\n    }\n";
  return c + "    " + acc + " = " + red + "[0];\n    tj_barrier();\n";
}

void Emitter::rowwise(const Kernel& K) {
  Sizes sp = K.space;
  Dim D = sp.back();
  Sizes outer(sp.begin(), sp.end() - 1);
  Dim rows = count(outer);
  const std::string Ds = C(D), G = std::to_string(kRowGroup);
  const std::string loop = "    for (int64_t j = tj_lid; j < " + Ds + "; j += " + G + ")";
  // Stores lead a rowwise kernel (fusion guarantees it): they run first.
  for (ValueId v : K.ops)
    if (g_.node(v).def().fuse == Fuse::store) store(v);
  local_.clear();
  // Row-space values in scratch rows: each op's own row of D doubles' room.
  const Dim slot = D * 8;
  out_.scratch_sizes.push_back(rows * Dim(static_cast<int64_t>(K.ops.size())) * slot);
  const ValueId scratch = static_cast<ValueId>(g_.size());
  std::string code = "  const int64_t row = tj_grp;\n";
  code += "  TJ_GLOBAL double* const mine = (TJ_GLOBAL double*)p" + std::to_string(scratch) + " + row * " +
          C(Dim(static_cast<int64_t>(K.ops.size())) * D) + ";\n  (void)mine;\n";
  Idx oi = loop_vars(outer.size(), "r");
  Idx row_index = unflat("row", outer);
  for (size_t d = 0; d < outer.size(); ++d) code += "  const int64_t " + oi[d] + " = " + row_index[d] + ";\n";
  Idx full = oi;
  full.push_back("j");
  Idx keep = oi;
  keep.push_back("0");
  std::vector<std::string> locals;
  int slots = 0;
  auto write_row = [&](ValueId v, const std::string& rowvar) {
    if (in_mem_[static_cast<size_t>(v)] || is_temp(v))
      code += loop + " " + ptr(v) + "[row*" + Ds + " + j] = " + stored(v, rowvar + "[j]") + ";\n";
  };
  for (ValueId v : K.ops) {
    const Node& n = g_.node(v);
    if (n.def().fuse == Fuse::store) continue;
    const std::string ty = CT(v);
    if (n.def().fuse == Fuse::reduction) {  // a last-axis reduction: per work-item, then across the group
      Accumulator A = accumulator(n);
      const std::string acc = "a" + std::to_string(v);
      code += "  " + A.type + " " + acc + " = " + A.init + ";\n";
      code += loop + " " + acc + " = " + update(A, acc, row_value(n.inputs[0], full, sp)) + ";\n  {\n";
      code += group_reduce(acc, A.integer, update(A, "$a", "$b"), &locals) + "  }\n";
      const std::string var = "s" + std::to_string(v);
      code += "  const " + ty + " " + var + " = " +
              rounded("(" + ty + ")(" + acc + (n.op == Op::mean ? " / (double)" + Ds : "") + ")", n.type.dtype) + ";\n";
      local_[v] = var;
      if (in_mem_[static_cast<size_t>(v)] || is_temp(v)) code += "  if (tj_lid == 0) " + ptr(v) + "[row] = " + stored(v, var) + ";\n";
      continue;
    }
    const bool full_row = n.type.shape == sp;
    if (n.def().fuse == Fuse::rowwise || full_row) {
      const std::string rowvar = "w" + std::to_string(v);
      code += "  TJ_GLOBAL " + ty + "* const " + rowvar + " = (TJ_GLOBAL " + ty + "*)(mine + " + std::to_string(slots++) + "*" + Ds + ");\n";
      if (n.def().fuse == Fuse::rowwise) {  // softmax, rms_norm, layer_norm as one op
        code += composite(n, v, rowvar, full, sp, D, &locals);
        if (is_narrow_float(n.type.dtype)) code += loop + " " + rowvar + "[j] = " + rounded(rowvar + "[j]", n.type.dtype) + ";\n";
      } else {
        code += loop + " " + rowvar + "[j] = " + with_rows(n, full) + ";\n";
      }
      local_row_[v] = rowvar;
      write_row(v, rowvar);
      continue;
    }
    // A per-row scalar ([.., 1] or [..]): every work-item has it.
    Idx own = n.type.shape.size() == sp.size() ? keep : oi;
    const std::string var = "s" + std::to_string(v);
    code += "  const " + ty + " " + var + " = " + elementwise_or_gather(n, own) + ";\n";
    local_[v] = var;
    if (in_mem_[static_cast<size_t>(v)] || is_temp(v)) code += "  if (tj_lid == 0) " + ptr(v) + "[row] = " + stored(v, var) + ";\n";
  }
  launch(&prog_.launches, "rowwise", code, rows * Dim(kRowGroup), kRowGroup, locals, {{scratch, "double"}});
  local_.clear();
  local_row_.clear();
}

// A Fuse::rowwise op's row: its RowForm (the op's row, ir/op.h) printed as
// the work-group's strided loops, each statistic reduced through work-group
// memory before the next pass (the C++ backend's composite_row, per group).
std::string Emitter::composite(const Node& n, ValueId v, const std::string& out, const Idx& full, const Sizes& sp, const Dim& D,
                               std::vector<std::string>* locals) {
  const RowForm& form = codegen::row_form(n, "the GPU backend");
  const std::string ty = CT(v), G = std::to_string(kRowGroup);
  const codegen::RowOperands o = row_operands(n, out, full, sp, D);
  const std::string loop = "    for (int64_t j = tj_lid; j < " + C(D) + "; j += " + G + ")";
  std::string c = "  {\n";
  for (const RowPass& p : form.passes) {
    if (p.stat) c += "    " + codegen::row_stat(p) + "\n";
    const std::string body = codegen::row_pass_body(p, o, out, ty, "tj_max_double");
    c += loop + " { " + body + "}\n";
    if (p.stat) c += group_reduce(p.stat, false, p.reduce == RowReduce::max ? "tj_max_double($a, $b)" : "$a + $b", locals);
    if (p.after) c += "    " + codegen::row_expr(p.after, o) + "\n";
  }
  return c + "  }\n";
}

}  // namespace tj::gpu
