// The GPU emitter's matrix products: a work-group per 16x16 tile of the
// output (per batch), A and B staged through work-group memory 16 columns of
// A (rows of B) at a time, read through any view; the epilogue's ops in
// registers at the element, up to the first store.
#include "codegen/gpu/emitter.h"

#include "tensorjit/error.h"

namespace tj::gpu {

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
  const std::string tiles_m = "((" + cpp::C(M) + " + " + TS + " - 1) / " + TS + ")", tiles_n = "((" + cpp::C(N) + " + " + TS + " - 1) / " + TS + ")";
  std::string code = "  const int64_t tn = tj_grp % " + tiles_n + ", tm = tj_grp / " + tiles_n + " % " + tiles_m + ", bt = tj_grp / " + tiles_n +
                     " / " + tiles_m + ";\n";
  Idx bv = cpp::loop_vars(batch.size(), "b"), bi = cpp::unflat("bt", batch);
  for (size_t d = 0; d < batch.size(); ++d) code += "  const int64_t " + bv[d] + " = " + bi[d] + ";\n";
  code += "  const int tx = tj_lid % " + TS + ", ty = tj_lid / " + TS + ";\n";
  code += "  const int64_t m = tm * " + TS + " + ty, n = tn * " + TS + " + tx;\n";
  code += "  " + acc_t + " acc = 0;\n";
  code += "  for (int64_t k0 = 0; k0 < " + cpp::C(Kd) + "; k0 += " + TS + ") {\n";
  auto operand = [&](ValueId x, const std::string& row, const std::string& col, const Dim& rows, const Dim& cols) {
    Sizes full = batch;
    full.push_back(rows);
    full.push_back(cols);
    Idx at = bv;
    at.push_back(row);
    at.push_back(col);
    return load(x, broadcast(x, full, at));
  };
  code += "    { const int64_t k = k0 + tx; tj_a[tj_lid] = m < " + cpp::C(M) + " && k < " + cpp::C(Kd) + " ? (" + acc_t + ")(" +
          operand(a, "m", "k", M, Kd) + ") : 0; }\n";
  code += "    { const int64_t k = k0 + ty; tj_b[tj_lid] = k < " + cpp::C(Kd) + " && n < " + cpp::C(N) + " ? (" + acc_t + ")(" +
          operand(b, "k", "n", Kd, N) + ") : 0; }\n";
  code += "    tj_barrier();\n    for (int kk = 0; kk < " + TS + "; ++kk) acc += tj_a[ty * " + TS + " + kk] * tj_b[kk * " + TS + " + tx];\n";
  code += "    tj_barrier();\n  }\n";
  code += "  if (m >= " + cpp::C(M) + " || n >= " + cpp::C(N) + ") return;\n";
  // The product and its epilogue at (batch.., m, n).
  Idx idx = bv;
  idx.push_back("m");
  idx.push_back("n");
  const std::string var = "v" + std::to_string(mm);
  code += "  const " + CT(mm) + " " + var + " = " + cpp::rounded("(" + CT(mm) + ")acc", n.type.dtype) + ";\n";
  local_.clear();
  local_[mm] = var;
  if (in_mem_[static_cast<size_t>(mm)] || is_temp(mm)) code += "  " + ptr(mm) + "[" + cpp::flat(idx, so) + "] = " + stored(mm, var) + ";\n";
  const size_t rest = segment(K, 1, idx, &code);
  // Work-groups: batch x tiles of M x tiles of N.
  launch(&prog_.launches, "matmul", code, cpp::count(batch) * Dim(kTile * kTile), kTile * kTile,
         {acc_t + " tj_a[" + std::to_string(kTile * kTile) + "]", acc_t + " tj_b[" + std::to_string(kTile * kTile) + "]"}, {},
         {{M, kTile}, {N, kTile}});
  local_.clear();
  if (rest < K.ops.size()) pointwise(K, rest);
}

}  // namespace tj::gpu
