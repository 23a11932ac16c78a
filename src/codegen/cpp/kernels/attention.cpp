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
  if (n.op != Op::flash_attn) return attention_grad_body(K);
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
  AttentionForm f;
  f.ty = CT(fa);  // f16/bf16: read as floats, computed in float, the result rounded once
  f.st = T(fa);
  f.causal = n.attr_bool("causal");
  f.bias = n.attr_bool("bias");
  f.zero_empty = n.attr_bool("zero_empty_rows");
  const std::string& st = f.st;
  // The bias: its strides over (batch, head, query, key), 0 where it
  // broadcasts (a dim of 1 that the scores do not have).
  std::string bias_ptr, bias_strides[4];
  if (f.bias) {
    ValueId x = n.inputs.back();
    auto view = strided(x);
    if (!view) {
      make_temp_copy(x, &code);
      view = Strided{x, 0, contiguous_strides(shape(x))};
    }
    auto sb = shape(x);
    bias_ptr = "(" + ptr(view->base) + " + " + C(view->offset) + ")";
    for (size_t d = 0; d < 4; ++d) bias_strides[d] = sb[d] == Dim(1) ? std::string("0") : C(view->strides[d]);
    f.bias_keys_contiguous = bias_strides[3] == "1";
  }
  bool copies = !code.empty();  // operands copied into temporaries first
  code += "{\n";
  code += "  const int64_t off = " + (f.causal ? "(int64_t)(" + load(n.inputs[3], {}) + ")" : std::string("0")) + ";\n";
  code += "  const double scale = " + literal(n.attr_float("scale"), DType::f64) + ";\n";
  if (f.bias) {
    code += "  const " + st + "* bias = " + bias_ptr + ";\n";
    code += "  const int64_t sb0 = " + bias_strides[0] + ", sb1 = " + bias_strides[1] + ", sb2 = " + bias_strides[2] +
            ", sb3 = " + bias_strides[3] + ";\n";
  }
  code += "  " + st + "* out = " + ptr(fa) + ";\n";
  code += "  const int64_t tj_tq = " + C(Tq) + ";\n";
  int64_t work = hint(B * H * Tq * S * (D + Dv));
  // Units of work. A row is one query of one head; the rows that read the
  // same KV head (its query heads times the queries, `group * Tq`) are cut
  // into blocks of kAttentionQueryBlock, and each block first transposes each block of keys,
  // so that a row's scores over the block are vector operations along the
  // keys with no horizontal sums (for head dims of 16 those cost more than
  // the products), and keys and values are read once per block of rows.
  // Rows are ordered (query, head): a key reaches a suffix of the block.
  // Where a KV head has one row (one query, one head per KV head) that row
  // takes each key's dot product along the head dimension instead.
  const int64_t group = H / Hkv;
  Dim rows = Tq * Dim(group);
  const int64_t rule_qb = hint(rows) > 1 && D.is_const() ? kAttentionQueryBlock : 1;
  if (tune_ && knobs_.label.empty()) {  // tuning: rows per block of keys, and keys per block
    for (int64_t q : {rule_qb, int64_t{1}}) {
      if (q == 1 && rule_qb == 1 && !alternatives_.empty()) break;
      for (int kb : {64, 128})
        alternatives_.push_back({0, false, static_cast<int>(q), kb, "query block " + std::to_string(q) + ", key block " + std::to_string(kb)});
    }
    tuning_signature_ = "attention " + f.ty + "/" + st + " B=" + C(B) + " H=" + std::to_string(H) + " Hkv=" + std::to_string(Hkv) +
                        " Tq=" + C(Tq) + " S=" + C(S) + " D=" + C(D) + " Dv=" + C(Dv) + (f.causal ? " causal" : "") + (f.bias ? " bias" : "") +
                        " strides " + p[1] + "," + p[2] + "," + p[3] + "," + p[5] + "," + p[6] + "," + p[7] + "," + p[9] + "," + p[10] + "," + p[11] +
                        " at B " + std::to_string(hint(B)) + ", Tq " + std::to_string(hint(Tq)) + ", S " + std::to_string(hint(S));
  }
  const int64_t qb = knobs_.attention_query_block > 0 ? knobs_.attention_query_block : rule_qb;
  std::string QB = std::to_string(qb), G = std::to_string(group) + "LL";
  std::string nrb = qb == 1 ? C(Tq) : "((" + C(rows) + " + " + QB + " - 1) / " + QB + ")";
  std::string units = C(B * Dim(qb == 1 ? H : Hkv)) + "*" + nrb;
  bool par = false;
  if (work < kParallelElements * 4 && !copies && K.ops.size() == 1 && hint(B * H) > 1) {
    team_work_ = work;  // units split over the team: [u0, u1) each
    code += "  const int64_t u0 = " + units + " * id / nt, u1 = " + units + " * (id + 1) / nt;\n";
    code += "  for (int64_t u = u0; u < u1; ++u) {\n";
  } else if (work >= kParallelElements * 4) {  // units in parts: causal rows differ in cost
    par = true;
    code += open_parallel_loop("u", units, false);
  } else {
    code += "  for (int64_t u = 0; u < " + units + "; ++u) {\n";
  }
  if (qb == 1) {
    code += "    const int64_t bh = u / " + nrb + ", i0 = u % " + nrb + ";\n";
    code += "    const int64_t b = bh / " + std::to_string(H) + "LL, h = bh % " + std::to_string(H) + "LL, g = h / " + G + ";\n";
    code += "    const " + st + "* q = " + p[0] + " + b*" + p[1] + " + h*" + p[2] + ";\n";
  } else {
    code += "    const int64_t bg = u / " + nrb + ", r0 = u % " + nrb + " * " + QB + ";\n";
    code += "    const int64_t b = bg / " + std::to_string(Hkv) + "LL, g = bg % " + std::to_string(Hkv) + "LL;\n";
    code += "    const " + st + "* q = " + p[0] + " + b*" + p[1] + ";\n";
    code += "    const int64_t hstride = " + p[2] + ";\n";
  }
  code += "    const int64_t qstride = " + p[3] + ";\n";
  code += "    const " + st + "* k = " + p[4] + " + b*" + p[5] + " + g*" + p[6] + ";\n";
  code += "    const " + st + "* v = " + p[8] + " + b*" + p[9] + " + g*" + p[10] + ";\n";
  code += "    const int64_t kstride = " + p[7] + ", vstride = " + p[11] + ";\n";
  code += "    constexpr int64_t kBlock = " + std::to_string(knobs_.attention_key_block > 0 ? knobs_.attention_key_block : 64) + ";\n";
  code += qb == 1 ? attention_one_query(f, C(S), C(D), Dv.value()) : attention_row_block(f, C(rows), C(S), H, group, D.value(), Dv.value(), qb);
  code += par ? close_parallel_loop() + "}\n" : "  }\n}\n";
  code += pointwise_body(K, 1);
  return code;
}

// Query i0 of a unit: its scores, running max and sum in the compute type;
// one block of keys at a time: dot products, block maximum, exponentials
// (vectorized), then the value rows weighted into the accumulator.
std::string Emitter::attention_one_query(const AttentionForm& f, const std::string& S, const std::string& D, int64_t Dv) {
  const std::string &ty = f.ty, &st = f.st;
  std::string code;
  code += "    const int64_t i = i0;\n    q += i*qstride;\n";
  code += "    const int64_t limit = " + std::string(f.causal ? "std::min<int64_t>(" + S + ", off + i + 1)" : S) + ";\n";
  if (f.bias) code += "    const " + st + "* brow = bias + b*sb0 + h*sb1 + i*sb2;\n";
  code += "    " + ty + " m = -INFINITY, l = 0, acc[" + std::to_string(Dv) + "] = {0};\n";
  code += "    " + ty + " s[kBlock];\n";
  code += "    for (int64_t j0 = 0; j0 < limit; j0 += kBlock) {\n";
  code += "      const int64_t jn = std::min<int64_t>(limit - j0, kBlock);\n";
  code += "      " + ty + " bm = m;\n";
  code += "      for (int64_t j = 0; j < jn; ++j) {\n";
  code += "        const " + st + "* kj = k + (j0 + j)*kstride;\n        " + ty + " dot = 0;\n";
  code += "#pragma omp simd reduction(+:dot)\n";
  code += "        for (int64_t d = 0; d < " + D + "; ++d) dot += q[d]*kj[d];\n";
  code += "        s[j] = dot * (" + ty + ")scale" + (f.bias ? " + brow[(j0 + j)*sb3]" : "") + ";\n        bm = std::max(bm, s[j]);\n      }\n";
  // While every score so far is -inf, subtract 0 (exp gives 0s), not -inf (NaN).
  code += "      const " + ty + " bs = bm == -INFINITY ? 0 : bm;\n";
  code += "      const " + ty + " corr = tj_exp(m - bs);\n      l *= corr;\n";
  code += "      for (int64_t d = 0; d < " + std::to_string(Dv) + "; ++d) acc[d] *= corr;\n";
  code += "#pragma omp simd\n      for (int64_t j = 0; j < jn; ++j) s[j] = tj_exp(s[j] - bs);\n";
  code += "      for (int64_t j = 0; j < jn; ++j) {\n";
  code += "        const " + ty + " pj = s[j];\n        l += pj;\n        const " + st + "* vj = v + (j0 + j)*vstride;\n";
  code += "#pragma omp simd\n";
  code += "        for (int64_t d = 0; d < " + std::to_string(Dv) + "; ++d) acc[d] += pj*vj[d];\n      }\n";
  code += "      m = bm;\n    }\n";
  code += "    " + st + "* o = out + (bh*tj_tq + i)*" + std::to_string(Dv) + ";\n";
  // No key, or every score -inf: l is 0 (NaN after a NaN score).
  code += "    for (int64_t d = 0; d < " + std::to_string(Dv) + "; ++d) o[d] = l > 0 ? acc[d]/l : (" + ty + ")" +
          (f.zero_empty ? "0" : "NAN") + ";\n";
  return code;
}

namespace {

// 16 lanes of `to` combined into its first, as a tree (one loop per step:
// constant trip counts, which GCC vectorizes; a fixed order): `op` with $ for
// the step's width.
std::string lane_tree(const std::string& indent, const std::string& to, const std::string& op) {
  std::string code;
  for (int w = 8; w >= 1; w /= 2) {
    std::string e = op;
    for (size_t at; (at = e.find('$')) != std::string::npos;) e.replace(at, 1, std::to_string(w));
    code += indent + "for (int64_t jj = 0; jj < " + std::to_string(w) + "; ++jj) " + to + "[jj] = " + e + ";\n";
  }
  return code;
}

}  // namespace

// dst[ii][j] = sum over d < Ds of row(r0 + ii)[d] * kt[d][j], for the block's
// rows ii < in and keys j < jp (whole vectors; kt padded with zeros): 4 rows
// at a time and 16 keys per vector, 4 independent multiply-add chains over
// d, each transposed key vector loaded once for the 4 rows (a vector type,
// not an array: GCC keeps an array of 16 in memory across a loop it does not
// unroll). Rows past the block's last compute the last row again, unused.
std::string Emitter::block_dots(const std::string& ty, const std::string& st, const std::string& row, const std::string& kt,
                                const std::string& dst, const std::string& Ds, const std::string& at) {
  std::string V = ty == "float" ? "tj_vfn" : "tj_vd16";
  std::string code;
  code += at + "for (int64_t i4 = 0; i4 < in; i4 += 4) {\n";
  code += at + "  const " + st + "* q0 = " + row + "(r0 + i4);\n";
  for (int w = 1; w < 4; ++w)
    code += at + "  const " + st + "* q" + std::to_string(w) + " = " + row + "(r0 + std::min<int64_t>(i4 + " + std::to_string(w) + ", in - 1));\n";
  // Floats in the CPU's own vectors, tj_per16 of them per 16 keys (a
  // 64-byte vector lives in memory without AVX-512).
  const bool f = ty == "float";
  const std::string step = f ? "tj_lanes" : "16";
  code += at + "  for (int64_t j = 0; j < jp; j += " + step + ") {\n" + at + "    " + V + " a0 = {}, a1 = {}, a2 = {}, a3 = {};\n";
  code += at + "    for (int64_t d = 0; d < " + Ds + "; ++d) {\n" + at + "      const " + V + " kv = *(const " + V + "*)&" + kt + "[d][j];\n";
  code += at + "      a0 += (" + ty + ")q0[d] * kv, a1 += (" + ty + ")q1[d] * kv, a2 += (" + ty + ")q2[d] * kv, a3 += (" + ty + ")q3[d] * kv;\n" +
          at + "    }\n";
  code += at + "    *(" + V + "*)&" + dst + "[i4][j] = a0;\n";
  for (int w = 1; w < 4; ++w)
    code += at + "    if (i4 + " + std::to_string(w) + " < in) *(" + V + "*)&" + dst + "[i4 + " + std::to_string(w) + "][j] = a" + std::to_string(w) + ";\n";
  code += at + "  }\n" + at + "}\n";
  return code;
}

// The weighted value rows of attention_row_block for float rows of Dv, a
// multiple of 16: the same sums in the same order (U partial sums over the
// keys, j mod U, added in order, then into the accumulator), held in
// U * Dv/16 vector variables. As an array GCC kept them in memory, each
// multiply-add waiting on the last one's store.
std::string Emitter::value_rows_in_registers(int64_t U, int64_t Dv) {
  // Each 16 floats are tj_per16 of the CPU's vectors (1, 2 or 4: known
  // only when the code is compiled), r<w>_<c>_<u>, those past tj_per16
  // unused (a 64-byte vector lives in memory without AVX-512).
  const int64_t C = Dv / 16;
  auto r = [](int64_t w, int64_t c, int u) { return "r" + std::to_string(w) + "_" + std::to_string(c) + "_" + std::to_string(u); };
  auto lanes = [](int64_t c, int u) { return std::to_string(16 * c) + " + " + std::to_string(u) + "*tj_lanes"; };
  auto each = [](int u, const std::string& stmt) { return u == 0 ? stmt : "if constexpr (tj_per16 > " + std::to_string(u) + ") " + stmt; };
  auto sum_into = [&](int64_t w, const std::string& key, const std::string& at) {
    std::string code = at + "{\n" + at + "  const float pj = s[" + key + "];\n" + at + "  const float* vj = v + (j0 + " + key + ")*vstride;\n";
    for (int64_t c = 0; c < C; ++c)
      for (int u = 0; u < 4; ++u) code += at + "  " + each(u, r(w, c, u) + " += pj * *(const tj_vfnu*)(vj + " + lanes(c, u) + ");") + "\n";
    return code + at + "}\n";
  };
  std::string code = "        tj_vfn";
  for (int64_t w = 0; w < U; ++w)
    for (int64_t c = 0; c < C; ++c)
      for (int u = 0; u < 4; ++u) code += std::string(w || c || u ? ", " : " ") + r(w, c, u) + " = {}";
  code += ";\n        int64_t j = 0;\n        for (; j + " + std::to_string(U) + " <= jm; j += " + std::to_string(U) + ") {\n";
  for (int64_t w = 0; w < U; ++w) code += sum_into(w, "j + " + std::to_string(w), "          ");
  code += "        }\n        for (; j < jm; ++j)\n" + sum_into(0, "j", "          ");
  for (int64_t w = 1; w < U; ++w)
    for (int64_t c = 0; c < C; ++c)
      for (int u = 0; u < 4; ++u) code += "        " + each(u, r(0, c, u) + " += " + r(w, c, u) + ";") + "\n";
  for (int64_t c = 0; c < C; ++c)
    for (int u = 0; u < 4; ++u) code += "        " + each(u, "*(tj_vfn*)&acc[ii][" + lanes(c, u) + "] += " + r(0, c, u) + ";") + "\n";
  return code;
}

// Rows [r0, r0 + qb) of a unit (row r: query r / group of head
// g*group + r % group), the same online softmax per row, one block of keys
// at a time for all of them. The block is transposed once (kt[d][j]), so
// the rows' scores are multiply-adds along the keys, 16 at a time and 4 rows
// at once in registers; then each row's weighted value rows, over its own
// keys, in registers, right after its softmax step.
std::string Emitter::attention_row_block(const AttentionForm& f, const std::string& rows, const std::string& S, int64_t H, int64_t group,
                                         int64_t D, int64_t Dv, int64_t qb) {
  const std::string &ty = f.ty, &st = f.st;
  const bool causal = f.causal;
  std::string G = std::to_string(group) + "LL";
  std::string Ds = std::to_string(D), Dvs = std::to_string(Dv), QB = std::to_string(qb);
  std::string code;
  code += "    const int64_t in = std::min<int64_t>(" + QB + ", " + rows + " - r0);\n";
  code += "    auto limit_of = [&](int64_t r) -> int64_t { return " +
          std::string(causal ? "std::min<int64_t>(" + S + ", off + r / " + G + " + 1)" : S) + "; };\n";
  code += "    auto row = [&](int64_t r) { return q + (g*" + G + " + r % " + G + ")*hstride + r / " + G + "*qstride; };\n";
  code += "    const int64_t limit = limit_of(r0 + in - 1);  // the last row sees the most keys\n";
  code += "    " + ty + " m[" + QB + "];\n    alignas(64) " + ty + " l[" + QB + "][16], acc[" + QB + "][" + Dvs + "];\n";
  code += "    for (int64_t ii = 0; ii < " + QB + "; ++ii) {\n      m[ii] = -INFINITY;\n";
  code += "      for (int64_t jj = 0; jj < 16; ++jj) l[ii][jj] = 0;\n";
  code += "      for (int64_t d = 0; d < " + Dvs + "; ++d) acc[ii][d] = 0;\n    }\n";
  code += "    alignas(64) " + ty + " kt[" + Ds + "][kBlock];\n    alignas(64) " + ty + " p[" + QB + "][kBlock];\n";
  code += "    for (int64_t j0 = 0; j0 < limit; j0 += kBlock) {\n";
  code += "      const int64_t jn = std::min<int64_t>(limit - j0, kBlock);\n";
  // Whole vectors of keys (jp, a multiple of 16): the scores of keys past
  // a query's last are -inf (their exponentials 0), and the padding of the
  // transposed block is zero, so no loop has a scalar remainder.
  code += "      const int64_t jp = (jn + 15) / 16 * 16;\n";
  code += "      for (int64_t j = 0; j < jn; ++j)\n        for (int64_t d = 0; d < " + Ds + "; ++d) kt[d][j] = k[(j0 + j)*kstride + d];\n";
  code += "      for (int64_t d = 0; d < " + Ds + "; ++d)\n        for (int64_t j = jn; j < jp; ++j) kt[d][j] = 0;\n";
  code += block_dots(ty, st, "row", "kt", "p", Ds, "      ");
  code += "      for (int64_t ii = 0; ii < in; ++ii) {\n";
  code += "        const int64_t jm = std::min<int64_t>(jn, limit_of(r0 + ii) - j0);  // this row's keys in the block\n";
  code += "        if (jm <= 0) continue;\n";
  code += "        " + ty + "* s = p[ii];\n";
  if (f.bias) {
    // Row r is query r / group of head g*group + r % group.
    std::string at = f.bias_keys_contiguous ? "brow[j0 + j]" : "brow[(j0 + j)*sb3]";
    code += "        const int64_t rr = r0 + ii;\n";
    code += "        const " + st + "* brow = bias + b*sb0 + (g*" + G + " + rr % " + G + ")*sb1 + rr / " + G + "*sb2;\n";
    code += "#pragma omp simd\n        for (int64_t j = 0; j < jm; ++j) s[j] = s[j] * (" + ty + ")scale + " + at + ";\n";
    code += "        for (int64_t j = jm; j < jp; ++j) s[j] = -INFINITY;\n";
  } else {
    code += "        for (int64_t j = 0; j < jp; j += 16)\n";
    code += "#pragma omp simd\n          for (int64_t jj = 0; jj < 16; ++jj) s[j + jj] = j + jj < jm ? s[j + jj] * (" + ty + ")scale : -INFINITY;\n";
  }
  // The block maximum in 16 lanes, then across them as a tree (a fixed
  // order, 4 steps deep, not a chain of 16). The sum stays in 16 lanes per
  // query (l[ii][..]), rescaled with the accumulator, and is added across
  // its lanes once, at the end.
  code += "        alignas(64) " + ty + " lane[16];\n";
  code += "#pragma omp simd\n        for (int64_t jj = 0; jj < 16; ++jj) lane[jj] = s[jj];\n";
  code += "        for (int64_t j = 16; j < jp; j += 16)\n";
  code += "#pragma omp simd\n          for (int64_t jj = 0; jj < 16; ++jj) lane[jj] = std::max(lane[jj], s[j + jj]);\n";
  code += lane_tree("        ", "lane", "std::max(lane[jj], lane[jj + $])");
  code += "        const " + ty + " bm = std::max(m[ii], lane[0]);\n";
  // While every score so far is -inf, subtract 0 (exp gives 0s), not -inf (NaN).
  code += "        const " + ty + " bs = bm == -INFINITY ? 0 : bm;\n";
  code += "        const " + ty + " corr = tj_exp(m[ii] - bs);\n";
  code += "        " + ty + "* li = l[ii];\n";
  code += "#pragma omp simd\n        for (int64_t jj = 0; jj < 16; ++jj) li[jj] *= corr;\n";
  code += "        for (int64_t j = 0; j < jp; j += 16)\n";
  code += "#pragma omp simd\n          for (int64_t jj = 0; jj < 16; ++jj) {\n            s[j + jj] = tj_exp(s[j + jj] - bs);\n";
  code += "            li[jj] += s[j + jj];\n          }\n";
  code += "        m[ii] = bm;\n";
  code += "#pragma omp simd\n        for (int64_t d = 0; d < " + Dvs + "; ++d) acc[ii][d] *= corr;\n";
  // The row's weighted value rows, over its own keys of the block, in
  // registers: U partial sums over the keys (j mod U), so that U * Dv/16
  // multiply-add chains are in flight, then added into the accumulator in a
  // fixed order.
  int64_t U = std::clamp<int64_t>(64 / std::max<int64_t>(Dv, 1), 1, 4);
  std::string Us = std::to_string(U);
  if (ty == "float" && st == "float" && Dv % 16 == 0 && U * (Dv / 16) <= 16) {
    code += value_rows_in_registers(U, Dv);
  } else {
    code += "        " + ty + " r[" + Us + "][" + Dvs + "] = {};\n";
    code += "        int64_t j = 0;\n        for (; j + " + Us + " <= jm; j += " + Us + ")\n";
    code += "          for (int64_t w = 0; w < " + Us + "; ++w) {\n            const " + ty + " pj = s[j + w];\n";
    code += "            const " + st + "* vj = v + (j0 + j + w)*vstride;\n";
    code += "#pragma omp simd\n            for (int64_t d = 0; d < " + Dvs + "; ++d) r[w][d] += pj*vj[d];\n          }\n";
    code += "        for (; j < jm; ++j) {\n          const " + ty + " pj = s[j];\n          const " + st + "* vj = v + (j0 + j)*vstride;\n";
    code += "#pragma omp simd\n          for (int64_t d = 0; d < " + Dvs + "; ++d) r[0][d] += pj*vj[d];\n        }\n";
    code += "        for (int64_t w = 1; w < " + Us + "; ++w)\n";
    code += "#pragma omp simd\n          for (int64_t d = 0; d < " + Dvs + "; ++d) r[0][d] += r[w][d];\n";
    code += "#pragma omp simd\n        for (int64_t d = 0; d < " + Dvs + "; ++d) acc[ii][d] += r[0][d];\n";
  }
  code += "      }\n    }\n";
  code += "    for (int64_t ii = 0; ii < in; ++ii) {\n";
  code += "      const int64_t r = r0 + ii, h = g*" + G + " + r % " + G + ";\n";
  code += "      " + st + "* o = out + ((b*" + std::to_string(H) + "LL + h)*tj_tq + r / " + G + ")*" + Dvs + ";\n";
  code += lane_tree("      ", "l[ii]", "l[ii][jj] + l[ii][jj + $]");
  // No key, or every score -inf: l is 0 (NaN after a NaN score).
  code += "      const bool any = l[ii][0] > 0;\n";
  code += "      for (int64_t d = 0; d < " + Dvs + "; ++d) o[d] = any ? acc[ii][d]/l[ii][0] : (" + ty + ")" + (f.zero_empty ? "0" : "NAN") +
          ";\n    }\n";
  return code;
}

}  // namespace tj::cpp
