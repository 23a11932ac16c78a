// The C++ emitter's attention kernels: online-softmax flash attention tiled
// over keys, causal and grouped-query.
#include "codegen/cpp/emitter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "tensorjit/error.h"

namespace tj::cpp {

std::string Emitter::attention_body(const Kernel& K) {
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

}  // namespace tj::cpp
