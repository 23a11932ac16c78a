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
  auto st = strided(x);
  if (!st || st->strides.back() != Dim(1)) {
    make_temp_copy(x, code);
    st = Strided{x, 0, contiguous_strides(shape(x))};
  }
  Rows r;
  r.p = "(" + ptr(st->base) + " + " + C(st->offset) + ")";
  // A dim of 1 broadcasts (a bias): stride 0.
  auto sx = shape(x);
  for (size_t d = 0; d < sx.size(); ++d) r.strides.push_back(sx[d] == Dim(1) ? std::string("0") : C(st->strides[d]));
  return r;
}

std::string Emitter::attention_grad_body(const Kernel& K) {
  ValueId v0 = K.ops[0];
  const Node& n = g_.node(v0);
  const bool lse = n.op == Op::attn_lse, dq = n.op == Op::attn_dq;
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
  const Dim Dq = sq[3], Dvd = lse ? Dim(0) : shape(n.inputs[2])[3];
  if (!sq[1].is_const() || !sk[1].is_const() || !Dq.is_const() || !Dvd.is_const())
    throw Error(std::string("code generation: ") + n.def().name + " needs concrete head counts and head dims, got " + shape_str(sq) +
                " and " + shape_str(sk));
  const int64_t H = sq[1].value(), Hkv = sk[1].value(), D = Dq.value(), Dv = Dvd.value(), group = H / Hkv;
  const std::string ty = CT(v0), st = T(v0), Ds = std::to_string(D), Dvs = std::to_string(Dv), G = std::to_string(group) + "LL";
  const std::string neg_inf = "-(" + ty + ")INFINITY";

  code += "{\n";
  code += "  const int64_t off = " + (causal ? "(int64_t)(" + load(n.inputs[extra], {}) + ")" : std::string("0")) + ";\n";
  code += "  const " + ty + " scale = (" + ty + ")" + literal(n.attr_float("scale"), DType::f64) + ";\n";
  code += "  const int64_t tj_t = " + C(Tq) + ", tj_s = " + C(S) + ";\n";
  code += "  " + st + "* out = " + ptr(v0) + ";\n";
  // Keys j < limit(i) are visible to query i: j <= off + i, clamped (no overflow).
  code += "  auto limit = [&](int64_t i) -> int64_t { return " +
          std::string(causal ? "off >= tj_s ? tj_s : off + i + 1 < 0 ? 0 : std::min<int64_t>(tj_s, off + i + 1)" : "tj_s") + "; };\n";
  // s_ij of query i of head h (batch b) and key j of its KV head.
  code += "  auto score = [&](int64_t b, int64_t h, int64_t i, int64_t j) -> " + ty + " {\n";
  code += "    const " + st + "* qi = " + q.p + " + b*" + q.strides[0] + " + h*" + q.strides[1] + " + i*" + q.strides[2] + ";\n";
  code += "    const " + st + "* kj = " + k.p + " + b*" + k.strides[0] + " + (h / " + G + ")*" + k.strides[1] + " + j*" + k.strides[2] + ";\n";
  code += "    " + ty + " dot = 0;\n#pragma omp simd reduction(+:dot)\n";
  code += "    for (int64_t d = 0; d < " + Ds + "; ++d) dot += (" + ty + ")qi[d]*(" + ty + ")kj[d];\n";
  code += "    return dot*scale" +
          (has_bias ? " + (" + ty + ")" + bias.p + "[b*" + bias.strides[0] + " + h*" + bias.strides[1] + " + i*" + bias.strides[2] +
                          " + j*" + bias.strides[3] + "]"
                    : std::string("")) +
          ";\n  };\n";
  if (!lse) {
    // p_ij from the row's log-sum-exp; a row with no visible key has none.
    code += "  auto prob = [&](" + ty + " s, " + ty + " li) -> " + ty + " { return li == " + neg_inf + " ? (" + ty + ")" +
            (zero_empty ? "0" : "NAN") + " : tj_exp(s - li); };\n";
    // lse and delta: [B, H, T], rows contiguous.
    for (const auto& [name, r] : {std::pair<const char*, const Rows*>{"lse_at", &l}, {"delta_at", &delta}})
      code += std::string("  auto ") + name + " = [&](int64_t b, int64_t h, int64_t i) -> " + ty + " { return (" + ty + ")" + r->p +
              "[b*" + r->strides[0] + " + h*" + r->strides[1] + " + i]; };\n";
    code += "  auto dout_row = [&](int64_t b, int64_t h, int64_t i) { return " + dout.p + " + b*" + dout.strides[0] + " + h*" +
            dout.strides[1] + " + i*" + dout.strides[2] + "; };\n";
    code += "  auto v_row = [&](int64_t b, int64_t g, int64_t j) { return " + v.p + " + b*" + v.strides[0] + " + g*" + v.strides[1] +
            " + j*" + v.strides[2] + "; };\n";
    code += "  auto dot_v = [&](const " + st + "* x, const " + st + "* y) -> " + ty + " {\n    " + ty +
            " r = 0;\n#pragma omp simd reduction(+:r)\n    for (int64_t d = 0; d < " + Dvs + "; ++d) r += (" + ty + ")x[d]*(" + ty +
            ")y[d];\n    return r;\n  };\n";
  }

  // Units: rows (b, h, i) of lse and dq; keys (b, g, j) of dkv.
  const Dim units = lse || dq ? B * Dim(H) * Tq : B * Dim(Hkv) * S;
  const int64_t per_unit = lse ? hint(S) * D : dq ? hint(S) * (2 * D + Dv) : group * hint(Tq) * (2 * D + 2 * Dv);
  const bool par = hint(units) * per_unit >= kParallelElements * 4;
  code += par ? open_parallel_loop("u", C(units), false) : "  for (int64_t u = 0; u < " + C(units) + "; ++u) {\n";
  if (lse || dq) {
    code += "    const int64_t b = u / (" + std::to_string(H) + "LL*tj_t), h = u / tj_t % " + std::to_string(H) + "LL, i = u % tj_t;\n";
    code += "    const int64_t lim = limit(i);\n";
  }
  if (lse) {
    // Online: the running maximum, and the sum rescaled when it grows.
    code += "    " + ty + " m = " + neg_inf + ", sum = 0;\n";
    code += "    for (int64_t j = 0; j < lim; ++j) {\n      const " + ty + " s = score(b, h, i, j);\n";
    code += "      if (s > m) {\n        sum = m == " + neg_inf + " ? 0 : sum * tj_exp(m - s);\n        m = s;\n      }\n";
    code += "      if (m != " + neg_inf + ") sum += tj_exp(s - m);\n    }\n";
    code += "    out[u] = m == " + neg_inf + " ? m : m + std::log(sum);\n";
  } else if (dq) {
    code += "    const " + ty + " li = lse_at(b, h, i), di = delta_at(b, h, i);\n";
    code += "    const " + st + "* dO = dout_row(b, h, i);\n";
    code += "    alignas(64) " + ty + " acc[" + Ds + "] = {};\n";
    code += "    for (int64_t j = 0; j < lim; ++j) {\n";
    code += "      const " + ty + " ds = prob(score(b, h, i, j), li) * (dot_v(dO, v_row(b, h / " + G + ", j)) - di);\n";
    code += "      const " + st + "* kj = " + k.p + " + b*" + k.strides[0] + " + (h / " + G + ")*" + k.strides[1] + " + j*" + k.strides[2] + ";\n";
    code += "#pragma omp simd\n      for (int64_t d = 0; d < " + Ds + "; ++d) acc[d] += ds*(" + ty + ")kj[d];\n    }\n";
    code += "    " + st + "* o = out + u*" + Ds + ";\n";
    code += "    for (int64_t d = 0; d < " + Ds + "; ++d) o[d] = acc[d]*scale;\n";
  } else {
    code += "    const int64_t b = u / (" + std::to_string(Hkv) + "LL*tj_s), g = u / tj_s % " + std::to_string(Hkv) + "LL, j = u % tj_s;\n";
    // The queries that see key j: i >= j - off (all of them when off >= j).
    code += "    const int64_t i0 = " + std::string(causal ? "off >= j ? 0 : off < j - tj_t ? tj_t : j - off" : "0") + ";\n";
    code += "    const " + st + "* vj = v_row(b, g, j);\n";
    code += "    alignas(64) " + ty + " dk[" + Ds + "] = {}, dv[" + Dvs + "] = {};\n";
    code += "    for (int64_t h = g*" + G + "; h < (g + 1)*" + G + "; ++h)\n";
    code += "      for (int64_t i = i0; i < tj_t; ++i) {\n";
    code += "        const " + st + "* dO = dout_row(b, h, i);\n";
    code += "        const " + ty + " p = prob(score(b, h, i, j), lse_at(b, h, i));\n";
    code += "        const " + ty + " ds = p * (dot_v(dO, vj) - delta_at(b, h, i));\n";
    code += "        const " + st + "* qi = " + q.p + " + b*" + q.strides[0] + " + h*" + q.strides[1] + " + i*" + q.strides[2] + ";\n";
    code += "#pragma omp simd\n        for (int64_t d = 0; d < " + Ds + "; ++d) dk[d] += ds*(" + ty + ")qi[d];\n";
    code += "#pragma omp simd\n        for (int64_t d = 0; d < " + Dvs + "; ++d) dv[d] += p*(" + ty + ")dO[d];\n      }\n";
    code += "    " + st + "* o = out + u*" + std::to_string(D + Dv) + ";\n";
    code += "    for (int64_t d = 0; d < " + Ds + "; ++d) o[d] = dk[d]*scale;\n";
    code += "    for (int64_t d = 0; d < " + Dvs + "; ++d) o[" + Ds + " + d] = dv[d];\n";
  }
  code += par ? close_parallel_loop() + "}\n" : "  }\n}\n";
  code += pointwise_body(K, 1);
  return code;
}

}  // namespace tj::cpp
