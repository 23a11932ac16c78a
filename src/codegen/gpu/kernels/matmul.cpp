// The GPU emitter's matrix products: a work-group per 16x16 tile of the
// output (per batch), A and B staged through work-group memory 16 columns of
// A (rows of B) at a time, read through any view; the epilogue's ops in
// registers at the element, up to the first store.
#include "codegen/gpu/emitter.h"

#include <algorithm>

#include "tensorjit/error.h"

namespace tj::gpu {

// Operand x of a product at (batch index, row, col), its batch dims
// broadcast against the product's.
std::string Emitter::element_of(ValueId x, const Sizes& batch, const Idx& bv, const Sizes& last, const Idx& at) {
  Sizes full = batch;
  full.insert(full.end(), last.begin(), last.end());
  Idx idx = bv;
  idx.insert(idx.end(), at.begin(), at.end());
  return load(x, broadcast(x, full, idx));
}

size_t Emitter::product_value(const Kernel& K, const std::string& acc, const Idx& idx, std::string* code) {
  const ValueId v = K.ops[0];
  const std::string var = "v" + std::to_string(v);
  *code += "  const " + CT(v) + " " + var + " = " + rounded("(" + CT(v) + ")" + acc, g_.type(v).dtype) + ";\n";
  local_.clear();
  local_[v] = var;
  if (in_mem_[static_cast<size_t>(v)] || is_temp(v)) *code += "  " + ptr(v) + "[" + flat(idx, shape(v)) + "] = " + stored(v, var) + ";\n";
  return segment(K, 1, idx, code);
}

void Emitter::matmul(const Kernel& K) {
  ValueId mm = K.ops[0];
  const Node& n = g_.node(mm);
  ValueId a = n.inputs[0], b = n.inputs[1];
  if (!is_float(n.type.dtype)) throw Unsupported("GPU code generation: matmul of " + std::string(dtype_name(n.type.dtype)));
  auto so = shape(mm);
  const size_t r = so.size();
  const Dim M = so[r - 2], N = so[r - 1], Kd = shape(a).back();
  const Sizes batch(so.begin(), so.end() - 2);
  // Products of f32 and narrower accumulate in float, as a GEMM does; f64 in double.
  const std::string acc_t = n.type.dtype == DType::f64 ? "double" : "float", TS = std::to_string(kTile);
  if (M == Dim(1) && hint(Kd) >= 64) return gemv(K, acc_t);
  const std::string tiles_m = "((" + C(M) + " + " + TS + " - 1) / " + TS + ")", tiles_n = "((" + C(N) + " + " + TS + " - 1) / " + TS + ")";
  std::string code = "  const int64_t tn = tj_grp % " + tiles_n + ", tm = tj_grp / " + tiles_n + " % " + tiles_m + ", bt = tj_grp / " + tiles_n +
                     " / " + tiles_m + ";\n";
  Idx bv = loop_vars(batch.size(), "b"), bi = unflat("bt", batch);
  for (size_t d = 0; d < batch.size(); ++d) code += "  const int64_t " + bv[d] + " = " + bi[d] + ";\n";
  code += "  const int tx = tj_lid % " + TS + ", ty = tj_lid / " + TS + ";\n";
  code += "  const int64_t m = tm * " + TS + " + ty, n = tn * " + TS + " + tx;\n";
  code += "  " + acc_t + " acc = 0;\n";
  code += "  for (int64_t k0 = 0; k0 < " + C(Kd) + "; k0 += " + TS + ") {\n";
  auto operand = [&](ValueId x, const std::string& row, const std::string& col, const Dim& rows, const Dim& cols) {
    return element_of(x, batch, bv, {rows, cols}, {row, col});
  };
  code += "    { const int64_t k = k0 + tx; tj_a[tj_lid] = m < " + C(M) + " && k < " + C(Kd) + " ? (" + acc_t + ")(" +
          operand(a, "m", "k", M, Kd) + ") : 0; }\n";
  code += "    { const int64_t k = k0 + ty; tj_b[tj_lid] = k < " + C(Kd) + " && n < " + C(N) + " ? (" + acc_t + ")(" +
          operand(b, "k", "n", Kd, N) + ") : 0; }\n";
  code += "    tj_barrier();\n    for (int kk = 0; kk < " + TS + "; ++kk) acc += tj_a[ty * " + TS + " + kk] * tj_b[kk * " + TS + " + tx];\n";
  code += "    tj_barrier();\n  }\n";
  code += "  if (m >= " + C(M) + " || n >= " + C(N) + ") return;\n";
  // The product and its epilogue at (batch.., m, n).
  Idx idx = bv;
  idx.push_back("m");
  idx.push_back("n");
  const size_t rest = product_value(K, "acc", idx, &code);
  // Work-groups: batch x tiles of M x tiles of N.
  launch(&prog_.launches, "matmul", code, count(batch) * Dim(kTile * kTile), kTile * kTile,
         {acc_t + " tj_a[" + std::to_string(kTile * kTile) + "]", acc_t + " tj_b[" + std::to_string(kTile * kTile) + "]"}, {},
         {{M, kTile}, {N, kTile}});
  local_.clear();
  if (rest < K.ops.size()) pointwise(K, rest);
}

// A product of one row (decode): no tiles, no barriers. The reduction over K
// is split into S slices so that there are enough work-items to keep the
// memory busy: a work-item per (batch, slice, column) sums its slice into
// scratch, adjacent work-items reading adjacent columns of each row of B;
// then a work-item per (batch, column) adds the slices in order and runs
// the epilogue.
void Emitter::gemv(const Kernel& K, const std::string& acc_t) {
  ValueId mm = K.ops[0];
  const Node& n = g_.node(mm);
  ValueId a = n.inputs[0], b = n.inputs[1];
  auto so = shape(mm);
  const Dim N = so.back(), Kd = shape(a).back();
  const Sizes batch(so.begin(), so.end() - 2);
  const Dim outs = count(batch) * N;
  // Slices: about 64k work-items in all, each slice at least 64 deep.
  const int64_t slices = std::clamp<int64_t>(65536 / std::max<int64_t>(hint(outs), 1), 1, std::max<int64_t>(hint(Kd) / 64, 1));
  const std::string S = std::to_string(slices), Ks = C(Kd), Ns = C(N);
  out_.scratch_sizes.push_back(outs * Dim(slices * static_cast<int64_t>(acc_t == "double" ? 8 : 4)));
  const ValueId scratch = static_cast<ValueId>(g_.size());
  const std::string part = "((TJ_GLOBAL " + acc_t + "*)p" + std::to_string(scratch) + ")";
  Idx bv = loop_vars(batch.size(), "b");
  auto operand = [&](ValueId x, const std::string& row, const std::string& col, const Dim& rows, const Dim& cols, const Idx& at) {
    return element_of(x, batch, at, {rows, cols}, {row, col});
  };
  std::string code = "  if (tj_gid >= " + C(outs) + " * " + S + ") return;\n";
  code += "  const int64_t n = tj_gid % " + Ns + ", s = tj_gid / " + Ns + " % " + S + ", bt = tj_gid / " + Ns + " / " + S + ";\n";
  Idx bi = unflat("bt", batch);
  for (size_t d = 0; d < batch.size(); ++d) code += "  const int64_t " + bv[d] + " = " + bi[d] + ";\n";
  code += "  const int64_t k0 = " + Ks + " * s / " + S + ", k1 = " + Ks + " * (s + 1) / " + S + ";\n";
  code += "  " + acc_t + " acc = 0;\n  for (int64_t k = k0; k < k1; ++k) acc += (" + acc_t + ")(" + operand(a, "0", "k", Dim(1), Kd, bv) + ") * (" +
          acc_t + ")(" + operand(b, "k", "n", Kd, N, bv) + ");\n";
  code += "  " + part + "[(bt * " + S + " + s) * " + Ns + " + n] = acc;\n";
  launch(&prog_.launches, "gemv", code, outs * Dim(slices), kGroup, {}, {{scratch, "double"}});
  // The slices' sum, in order, and the epilogue at (batch.., 0, n).
  local_.clear();
  code = "  if (tj_gid >= " + C(outs) + ") return;\n  const int64_t n = tj_gid % " + Ns + ", bt = tj_gid / " + Ns + ";\n";
  for (size_t d = 0; d < batch.size(); ++d) code += "  const int64_t " + bv[d] + " = " + bi[d] + ";\n";
  code += "  " + acc_t + " acc = 0;\n  for (int s = 0; s < " + S + "; ++s) acc += " + part + "[(bt * " + S + " + s) * " + Ns + " + n];\n";
  Idx idx = bv;
  idx.push_back("0");
  idx.push_back("n");
  const size_t rest = product_value(K, "acc", idx, &code);
  launch(&prog_.launches, "gemv_sum", code, outs, kGroup, {}, {{scratch, "double"}});
  local_.clear();
  if (rest < K.ops.size()) pointwise(K, rest);
}

}  // namespace tj::gpu
