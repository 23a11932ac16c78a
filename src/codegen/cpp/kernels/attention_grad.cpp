// The C++ emitter's kernels for flash attention's backward
// (ir/ops/attention_grad.cpp): each recomputes the scores of one query row
// (attn_lse, attn_dq) or one key (attn_dkv) as it goes, never the score
// matrix. Units of work are rows or keys, split over the pool when there is
// enough work; each unit accumulates in the compute type, in a fixed order,
// so results do not depend on the thread count.
#include "codegen/cpp/emitter.h"

#include "tensorjit/error.h"

namespace tj::cpp {

// Operand x read through a view whose last dim is contiguous (else copied
// into a temporary first, appended to `code`): its base pointer expression
// and strides.
Emitter::Rows Emitter::rows_of(ValueId x, std::string* code) {
  return as_rows(x, [&](ValueId v) { make_temp_copy(v, code); });
}

std::string Emitter::attention_grad_body(const Kernel& K) {
  ValueId v0 = K.ops[0];
  const Node& n = g_.node(v0);
  const bool lse = n.op == Op::attn_lse, dq = n.op == Op::attn_dq, dkv = n.op == Op::attn_dkv;
  const size_t extra = lse ? 2 : 6;  // where offset and bias start
  const bool causal = n.attr_bool("causal"), has_bias = n.attr_bool("bias"), zero_empty = n.attr_bool("zero_empty_rows");
  std::string code;
  Rows q = rows_of(n.inputs[0], &code), k = rows_of(n.inputs[1], &code);
  Rows v, dout, l, delta, bias;
  if (!lse) {
    v = rows_of(n.inputs[2], &code), dout = rows_of(n.inputs[3], &code);
    l = rows_of(n.inputs[4], &code), delta = rows_of(n.inputs[5], &code);
  }
  if (has_bias) bias = rows_of(n.inputs.back(), &code);
  auto sq = shape(n.inputs[0]), sk = shape(n.inputs[1]);
  const Dim B = sq[0], Tq = sq[2], S = sk[2];
  const Dim Dq = sq[3], Dvd = lse ? Dim(1) : shape(n.inputs[2])[3];
  if (!sq[1].is_const() || !sk[1].is_const() || !Dq.is_const() || !Dvd.is_const())
    throw Error(std::string("code generation: ") + n.def().name + " needs concrete head counts and head dims, got " + shape_str(sq) +
                " and " + shape_str(sk));
  const int64_t H = sq[1].value(), Hkv = sk[1].value(), D = Dq.value(), Dv = Dvd.value(), group = H / Hkv;
  const std::string ty = CT(v0), st = T(v0), Ds = std::to_string(D), Dvs = std::to_string(Dv), G = std::to_string(group) + "LL";
  const std::string Hs = std::to_string(H) + "LL", Hkvs = std::to_string(Hkv) + "LL", QB = std::to_string(kAttentionQueryBlock);
  const std::string neg_inf = "-(" + ty + ")INFINITY";
  auto at = [](const Rows& r, const std::string& a, const std::string& b, const std::string& c) {
    return r.p + " + " + a + "*" + r.strides[0] + " + " + b + "*" + r.strides[1] + " + " + c + "*" + r.strides[2];
  };

  code += "{\n";
  code += "  const int64_t off = " + (causal ? "(int64_t)(" + load(n.inputs[extra], {}) + ")" : std::string("0")) + ";\n";
  code += "  const " + ty + " scale = (" + ty + ")" + literal(n.attr_float("scale"), DType::f64) + ";\n";
  code += "  const int64_t tj_t = " + C(Tq) + ", tj_s = " + C(S) + ", tj_rows = tj_t*" + G + ";\n";
  code += "  " + st + "* out = " + ptr(v0) + ";\n";
  // Keys j < limit(i) are visible to query i: j <= off + i, clamped (no overflow).
  code += "  auto limit = [&](int64_t i) -> int64_t { return " +
          std::string(causal ? "off >= tj_s ? tj_s : off + i + 1 < 0 ? 0 : std::min<int64_t>(tj_s, off + i + 1)" : "tj_s") + "; };\n";
  code += "  constexpr int64_t kBlock = 64;\n";

  // Units: a block of rows of one KV head (lse, dq), or a block of its keys
  // (dkv). Row r of KV head g is query r / G of head g*G + r % G, as in
  // flash_attn's kernel.
  const Dim rows = Tq * Dim(group);
  const std::string nb = dkv ? "((" + C(S) + " + 63) / 64)" : "((" + C(rows) + " + " + QB + " - 1) / " + QB + ")";
  const std::string units = C(B * Dim(Hkv)) + "*" + nb;
  const int64_t pairs = hint(B * Dim(H) * Tq * S);
  const bool par = pairs * (lse ? D : 2 * (D + Dv)) >= kParallelElements * 4;
  code += par ? open_parallel_loop("u", units, false) : "  for (int64_t u = 0; u < " + units + "; ++u) {\n";
  code += "    const int64_t bg = u / " + nb + ", b = bg / " + Hkvs + ", g = bg % " + Hkvs + ";\n";
  code += "    auto head = [&](int64_t r) { return g*" + G + " + r % " + G + "; };\n";
  code += "    auto row = [&](int64_t r) { return " + at(q, "b", "head(r)", "(r / " + G + ")") + "; };\n";
  if (!lse) {
    code += "    auto drow = [&](int64_t r) { return " + at(dout, "b", "head(r)", "(r / " + G + ")") + "; };\n";
    code += "    auto lse_of = [&](int64_t r) -> " + ty + " { return (" + ty + ")*(" + at(l, "b", "head(r)", "(r / " + G + ")") + "); };\n";
    code += "    auto delta_of = [&](int64_t r) -> " + ty + " { return (" + ty + ")*(" + at(delta, "b", "head(r)", "(r / " + G + ")") + "); };\n";
  }
  code += "    const " + st + "* k = " + at(k, "b", "g", "0") + ";\n";
  if (!lse) code += "    const " + st + "* v = " + at(v, "b", "g", "0") + ";\n";
  code += "    const int64_t kstride = " + k.strides[2] + (lse ? "" : ", vstride = " + v.strides[2]) + ";\n";
  code += "    alignas(64) " + ty + " kt[" + Ds + "][kBlock], s[" + QB + "][kBlock];\n";
  if (!lse) code += "    alignas(64) " + ty + " vt[" + Dvs + "][kBlock], dp[" + QB + "][kBlock];\n";
  // Keys [j0, j0 + jn) transposed (and V's, for dout.v), padded with zeros to jp.
  auto transpose = [&](const std::string& to, const std::string& from, const std::string& stride, const std::string& width) {
    return "      for (int64_t j = 0; j < jn; ++j)\n        for (int64_t d = 0; d < " + width + "; ++d) " + to + "[d][j] = (" + ty +
           ")" + from + "[(j0 + j)*" + stride + " + d];\n      for (int64_t d = 0; d < " + width + "; ++d)\n        for (int64_t j = jn; j < jp; ++j) " +
           to + "[d][j] = 0;\n";
  };
  // Row ii's scores over the block, scaled, with its bias, -inf past its jm keys.
  auto scores = [&]() {
    std::string c = "        " + ty + "* sc = s[ii];\n";
    if (has_bias)
      c += "        const " + st + "* brow = " + at(bias, "b", "head(r)", "(r / " + G + ")") + ";\n#pragma omp simd\n" +
           "        for (int64_t j = 0; j < jm; ++j) sc[j] = sc[j]*scale + (" + ty + ")brow[(j0 + j)*" + bias.strides[3] + "];\n";
    else
      c += "#pragma omp simd\n        for (int64_t j = 0; j < jm; ++j) sc[j] *= scale;\n";
    return c + "        for (int64_t j = jm; j < jp; ++j) sc[j] = " + neg_inf + ";\n";
  };
  // p and ds of row ii over the block (into sc and dp[ii]).
  std::string probs = "        const " + ty + " li = lse_of(r), di = delta_of(r);\n";
  probs += "        if (li == " + neg_inf + ")\n          for (int64_t j = 0; j < jp; ++j) sc[j] = j < jm ? (" + ty + ")" +
           (zero_empty ? "0" : "NAN") + " : 0;\n        else\n";
  probs += "#pragma omp simd\n          for (int64_t j = 0; j < jp; ++j) sc[j] = tj_exp(sc[j] - li);\n";
  probs += "#pragma omp simd\n        for (int64_t j = 0; j < jp; ++j) dp[ii][j] = sc[j]*(dp[ii][j] - di);\n";

  if (!dkv) {
    code += "    const int64_t r0 = u % " + nb + " * " + QB + ", in = std::min<int64_t>(" + QB + ", tj_rows - r0);\n";
    code += "    const int64_t last = limit((r0 + in - 1) / " + G + ");  // the last row sees the most keys\n";
    if (lse) code += "    " + ty + " m[" + QB + "], sum[" + QB + "];\n    for (int64_t ii = 0; ii < " + QB + "; ++ii) m[ii] = " + neg_inf + ", sum[ii] = 0;\n";
    else code += "    alignas(64) " + ty + " acc[" + QB + "][" + Ds + "] = {};\n";
    code += "    for (int64_t j0 = 0; j0 < last; j0 += kBlock) {\n";
    code += "      const int64_t jn = std::min<int64_t>(last - j0, kBlock), jp = (jn + 15) / 16 * 16;\n";
    code += transpose("kt", "k", "kstride", Ds);
    code += block_dots(ty, st, "row", "kt", "s", Ds, "      ");
    if (dq) code += transpose("vt", "v", "vstride", Dvs) + block_dots(ty, st, "drow", "vt", "dp", Dvs, "      ");
    code += "      for (int64_t ii = 0; ii < in; ++ii) {\n        const int64_t r = r0 + ii;\n";
    code += "        const int64_t jm = std::min<int64_t>(jn, limit(r / " + G + ") - j0);\n        if (jm <= 0) continue;\n";
    code += scores();
    if (lse) {
      // Online: the block's maximum, the sum so far rescaled to it.
      code += "        " + ty + " bm = m[ii];\n#pragma omp simd reduction(max:bm)\n        for (int64_t j = 0; j < jp; ++j) bm = std::max(bm, sc[j]);\n";
      code += "        if (bm == " + neg_inf + ") continue;\n";
      code += "        " + ty + " add = 0;\n#pragma omp simd reduction(+:add)\n        for (int64_t j = 0; j < jp; ++j) add += tj_exp(sc[j] - bm);\n";
      code += "        sum[ii] = (m[ii] == " + neg_inf + " ? 0 : sum[ii]*tj_exp(m[ii] - bm)) + add;\n        m[ii] = bm;\n";
    } else {
      code += probs;
      // In a local array (registers): acc may alias nothing, but the compiler cannot know that of a row of it.
      code += "        " + ty + " a[" + Ds + "];\n        const " + ty + "* ds = dp[ii];\n";
      code += "        for (int64_t d = 0; d < " + Ds + "; ++d) a[d] = acc[ii][d];\n";
      code += "        for (int64_t j = 0; j < jm; ++j) {\n          const " + st + "* kj = k + (j0 + j)*kstride;\n";
      code += "#pragma omp simd\n          for (int64_t d = 0; d < " + Ds + "; ++d) a[d] += ds[j]*(" + ty + ")kj[d];\n        }\n";
      code += "        for (int64_t d = 0; d < " + Ds + "; ++d) acc[ii][d] = a[d];\n";
    }
    code += "      }\n    }\n";
    code += "    for (int64_t ii = 0; ii < in; ++ii) {\n      const int64_t r = r0 + ii, at = (b*" + Hs + " + head(r))*tj_t + r / " + G + ";\n";
    if (lse) code += "      out[at] = m[ii] == " + neg_inf + " ? m[ii] : m[ii] + std::log(sum[ii]);\n";
    else code += "      for (int64_t d = 0; d < " + Ds + "; ++d) out[at*" + Ds + " + d] = acc[ii][d]*scale;\n";
    code += "    }\n";
  } else {
    code += "    const int64_t j0 = u % " + nb + " * kBlock, jn = std::min<int64_t>(tj_s - j0, kBlock), jp = (jn + 15) / 16 * 16;\n";
    code += transpose("kt", "k", "kstride", Ds) + transpose("vt", "v", "vstride", Dvs);
    code += "    alignas(64) " + ty + " dk[kBlock][" + Ds + "] = {}, dv[kBlock][" + Dvs + "] = {};\n";
    // The first query that sees key j0: all when off >= j0.
    code += "    const int64_t i0 = " + std::string(causal ? "off >= j0 ? 0 : off < j0 - tj_t ? tj_t : j0 - off" : "0") + ";\n";
    code += "    for (int64_t r0 = i0*" + G + "; r0 < tj_rows; r0 += " + QB + ") {\n";
    code += "      const int64_t in = std::min<int64_t>(" + QB + ", tj_rows - r0);\n";
    code += block_dots(ty, st, "row", "kt", "s", Ds, "      ") + block_dots(ty, st, "drow", "vt", "dp", Dvs, "      ");
    code += "      for (int64_t ii = 0; ii < in; ++ii) {\n        const int64_t r = r0 + ii;\n";
    code += "        const int64_t jm = std::min<int64_t>(jn, limit(r / " + G + ") - j0);\n        if (jm <= 0) continue;\n";
    code += scores() + probs;
    code += "        const " + st + "* qr = row(r);\n        const " + st + "* dO = drow(r);\n        const " + ty + "* ds = dp[ii];\n";
    code += "        for (int64_t j = 0; j < jm; ++j) {\n";
    code += "#pragma omp simd\n          for (int64_t d = 0; d < " + Ds + "; ++d) dk[j][d] += ds[j]*(" + ty + ")qr[d];\n";
    code += "#pragma omp simd\n          for (int64_t d = 0; d < " + Dvs + "; ++d) dv[j][d] += sc[j]*(" + ty + ")dO[d];\n        }\n";
    code += "      }\n    }\n";
    code += "    for (int64_t j = 0; j < jn; ++j) {\n      " + st + "* o = out + ((b*" + Hkvs + " + g)*tj_s + j0 + j)*" + std::to_string(D + Dv) + ";\n";
    code += "      for (int64_t d = 0; d < " + Ds + "; ++d) o[d] = dk[j][d]*scale;\n";
    code += "      for (int64_t d = 0; d < " + Dvs + "; ++d) o[" + Ds + " + d] = dv[j][d];\n    }\n";
  }
  code += par ? close_parallel_loop() + "}\n" : "  }\n}\n";
  code += pointwise_body(K, 1);
  return code;
}

}  // namespace tj::cpp
