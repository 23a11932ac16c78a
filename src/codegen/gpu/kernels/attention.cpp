// The GPU emitter's attention kernels: a work-item per (batch, head, query)
// row, online softmax over the keys it sees (causal and grouped-query, with
// an added bias), in double; the scores are never stored. Flash attention's
// backward recomputes them as it goes: a work-item per row (attn_lse,
// attn_dq) or per key of a KV head (attn_dkv, summing over the rows of the
// query heads that read it).
#include "codegen/gpu/emitter.h"

#include "tensorjit/error.h"

namespace tj::gpu {

Emitter::Rows Emitter::strided_rows(ValueId x) {
  return as_rows(x, [&](ValueId v) { copy_into(v); });
}

std::string Emitter::row(const Rows& r, const std::string& a, const std::string& b, const std::string& c) {
  return r.p + " + " + a + "*" + r.strides[0] + " + " + b + "*" + r.strides[1] + " + " + c + "*" + r.strides[2];
}

void Emitter::attention(const Kernel& K) {
  ValueId fa = K.ops[0];
  const Node& n = g_.node(fa);
  if (n.op != Op::flash_attn) return attention_grad(K);
  Rows q = strided_rows(n.inputs[0]), k = strided_rows(n.inputs[1]), v = strided_rows(n.inputs[2]);
  auto sq = shape(n.inputs[0]), sk = shape(n.inputs[1]), sv = shape(n.inputs[2]);
  const Dim B = sq[0], Tq = sq[2], D = sq[3], S = sk[2], Dv = sv[3];
  if (!sq[1].is_const() || !sk[1].is_const() || !Dv.is_const())
    throw Error("code generation: flash_attn needs concrete head counts and value width, got " + shape_str(sq) + " and " + shape_str(sv));
  const int64_t H = sq[1].value(), Hkv = sk[1].value();
  const std::string ty = CT(fa), st = T(fa), Dvs = std::to_string(Dv.value());
  const DType dt = g_.type(fa).dtype;
  auto at = [&](const std::string& e) { return is_narrow_float(dt) ? read_narrow(dt, e) : e; };
  // Few queries (a decode step: a row per batch and head): a work-group per
  // row, its work-items splitting the keys, then the value dims; else (a
  // prefill's many rows) a work-item per row.
  const Dim rows = B * Dim(H) * Tq;
  const bool groups = hint(Tq) <= 8 && hint(rows) < 4096;
  const std::string who = groups ? "tj_grp" : "tj_gid";
  std::string code = groups ? "" : "  if (tj_gid >= " + C(rows) + ") return;\n";
  code += "  const int64_t i = " + who + " % " + C(Tq) + ", h = " + who + " / " + C(Tq) + " % " + std::to_string(H) + "L, b = " + who +
          " / " + C(Tq) + " / " + std::to_string(H) + "L, g = h / " + std::to_string(H / std::max<int64_t>(Hkv, 1)) + "L;\n";
  code += "  TJ_GLOBAL const " + st + "* const qr = " + row(q, "b", "h", "i") + ";\n";
  code += "  TJ_GLOBAL const " + st + "* const kh = " + row(k, "b", "g", "0") + ";\n";
  code += "  TJ_GLOBAL const " + st + "* const vh = " + row(v, "b", "g", "0") + ";\n";
  // Keys j < limit are visible: j <= offset + i (clamped: no overflow for any offset).
  std::string limit = C(S);
  if (n.attr_bool("causal")) {
    code += "  const int64_t off = (int64_t)(" + load(n.inputs[3], {}) + ");\n";
    limit = "(off >= " + C(S) + " ? " + C(S) + " : off + i + 1 < 0 ? 0 : tj_smin_int64_t(" + C(S) + ", off + i + 1))";
  }
  std::string bias;
  if (n.attr_bool("bias")) {
    Rows br = strided_rows(n.inputs.back());
    bias = " + (double)" + at("(" + row(br, "b", "h", "i") + ")[j*" + br.strides[3] + "]");
  }
  code += "  const int64_t limit = " + limit + ";\n";
  const std::string score = "    double s = 0;\n    for (int64_t d = 0; d < " + C(D) + "; ++d) s += (double)" + at("qr[d]") + " * (double)" +
                            at("kh[j*" + k.strides[2] + " + d]") + ";\n    s = s * " + literal(n.attr_float("scale"), DType::f64) + bias + ";\n";
  const std::string value = at("vh[j*" + v.strides[2] + " + d]");
  // A row with every key masked has no defined softmax: NaN, as softmax
  // gives, or 0 where asked (zero_empty_rows).
  const std::string fill = n.attr_bool("zero_empty_rows") ? "0.0" : "(double)NAN";
  auto result = [&](const std::string& acc) { return stored(fa, rounded("(" + ty + ")(empty ? " + fill + " : " + acc + " / sum)", dt)); };
  code += "  TJ_GLOBAL " + st + "* const out = " + ptr(fa) + " + " + who + " * " + Dvs + ";\n";
  if (groups) {
    // The row's scores, then their exponentials, in scratch; the maximum
    // and the sum through work-group memory; then work-item t sums value
    // dims t, t + G, ... over the keys (adjacent work-items, adjacent dims).
    out_.scratch_sizes.push_back(rows * S * Dim(8));
    const ValueId scratch = static_cast<ValueId>(g_.size());
    std::vector<std::string> locals;
    const std::string G = std::to_string(kRowGroup), keys = "  for (int64_t j = tj_lid; j < limit; j += " + G + ") {\n";
    code += "  TJ_GLOBAL double* const sc = (TJ_GLOBAL double*)p" + std::to_string(scratch) + " + tj_grp * " + C(S) + ";\n";
    code += "  double m = -INFINITY, sum = 0;\n" + keys + score + "    sc[j] = s;\n    m = tj_max_double(m, s);\n  }\n  {\n";
    code += group_reduce("m", false, "tj_max_double($a, $b)", &locals);
    code += "  }\n" + keys + "    const double e = m == -INFINITY ? 0.0 : exp(sc[j] - m);\n    sc[j] = e;\n    sum += e;\n  }\n  {\n";
    code += group_reduce("sum", false, "$a + $b", &locals) + "  }\n  tj_barrier_global();  // every work-item's exponentials, seen by all\n";
    code += "  const int empty = !(sum > 0);\n";
    code += "  for (int64_t d = tj_lid; d < " + Dvs + "; d += " + G + ") {\n    double acc = 0;\n";
    code += "    for (int64_t j = 0; j < limit; ++j) acc += sc[j] * (double)" + value + ";\n";
    code += "    out[d] = " + result("acc") + ";\n  }\n";
    launch(&prog_.launches, "attention_rows", code, rows * Dim(kRowGroup), kRowGroup, locals, {{scratch, "double"}});
  } else {
    code += "  double m = -INFINITY, sum = 0, acc[" + Dvs + "];\n  for (int d = 0; d < " + Dvs + "; ++d) acc[d] = 0;\n";
    code += "  for (int64_t j = 0; j < limit; ++j) {\n" + score;
    // A key scored -inf adds nothing; one above the running maximum rescales the sums.
    code += "    if (s == -INFINITY) continue;\n";
    code += "    if (s > m) { const double c = exp(m - s); sum *= c; for (int d = 0; d < " + Dvs + "; ++d) acc[d] *= c; m = s; }\n";
    code += "    const double e = exp(s - m);\n    sum += e;\n";
    code += "    for (int d = 0; d < " + Dvs + "; ++d) acc[d] += e * (double)" + value + ";\n  }\n";
    code += "  const int empty = !(sum > 0);\n";
    code += "  for (int d = 0; d < " + Dvs + "; ++d) out[d] = " + result("acc[d]") + ";\n";
    launch(&prog_.launches, "attention", code, rows);
  }
  if (K.ops.size() > 1) pointwise(K, 1);
}

void Emitter::attention_grad(const Kernel& K) {
  ValueId v0 = K.ops[0];
  const Node& n = g_.node(v0);
  const bool lse = n.op == Op::attn_lse, dkv = n.op == Op::attn_dkv;
  const size_t extra = lse ? 2 : 6;  // where offset and bias start
  Rows q = strided_rows(n.inputs[0]), k = strided_rows(n.inputs[1]), v, dout, l, delta, bias;
  if (!lse) v = strided_rows(n.inputs[2]), dout = strided_rows(n.inputs[3]), l = strided_rows(n.inputs[4]), delta = strided_rows(n.inputs[5]);
  if (n.attr_bool("bias")) bias = strided_rows(n.inputs.back());
  auto sq = shape(n.inputs[0]), sk = shape(n.inputs[1]);
  const Dim B = sq[0], Tq = sq[2], S = sk[2], Dq = sq[3], Dvd = lse ? Dim(1) : shape(n.inputs[2])[3];
  if (!sq[1].is_const() || !sk[1].is_const() || !Dq.is_const() || !Dvd.is_const())
    throw Error(std::string("code generation: ") + n.def().name + " needs concrete head counts and head dims, got " + shape_str(sq) + " and " +
                shape_str(sk));
  const int64_t H = sq[1].value(), Hkv = sk[1].value(), D = Dq.value(), Dv = Dvd.value(), group = H / Hkv;
  const std::string ty = CT(v0), st = T(v0), Ds = std::to_string(D), Dvs = std::to_string(Dv), G = std::to_string(group) + "L";
  const DType dt = g_.type(v0).dtype;
  auto at = [&](const std::string& e) { return "(double)" + (is_narrow_float(dt) ? read_narrow(dt, e) : e); };
  std::string code;
  code += "  const int64_t off = " + (n.attr_bool("causal") ? "(int64_t)(" + load(n.inputs[extra], {}) + ")" : std::string("0")) + ";\n";
  code += "  const double scale = " + literal(n.attr_float("scale"), DType::f64) + ";\n  (void)off;\n";
  const std::string Ss = C(S), Tqs = C(Tq);
  // Keys j < limit(i) are visible to query i: j <= off + i, clamped.
  const std::string limit = n.attr_bool("causal") ? "(off >= " + Ss + " ? " + Ss + " : off + i + 1 < 0 ? 0 : tj_smin_int64_t(" + Ss + ", off + i + 1))" : Ss;
  // The score of query row qr against key j, scaled, with its bias: into s.
  const std::string score = "      double s = 0;\n      for (int64_t d = 0; d < " + Ds + "; ++d) s += " + at("qr[d]") + " * " + at("kj[d]") + ";\n" +
                            "      s = s * scale" + (bias.p.empty() ? "" : " + " + at("(" + row(bias, "b", "h", "i") + ")[j*" + bias.strides[3] + "]")) + ";\n";
  // p and ds of (i, j): from the row's lse and delta.
  const std::string probs = "      const double p = li == -INFINITY ? " + std::string(n.attr_bool("zero_empty_rows") ? "0.0" : "(double)NAN") +
                            " : exp(s - li);\n      double dp = 0;\n      for (int64_t d = 0; d < " + Dvs + "; ++d) dp += " + at("dO[d]") + " * " +
                            at("vj[d]") + ";\n      const double ds = p * (dp - di);\n";
  auto row_values = [&]() {  // lse, delta and dout of row (b, h, i)
    return "      const double li = " + at("*(" + row(l, "b", "h", "i") + ")") + ", di = " + at("*(" + row(delta, "b", "h", "i") + ")") + ";\n" +
           "      TJ_GLOBAL const " + st + "* const dO = " + row(dout, "b", "h", "i") + ";\n";
  };
  const std::string out = ptr(v0);
  if (!dkv) {
    code += "  if (tj_gid >= " + C(B * Dim(H) * Tq) + ") return;\n";
    code += "  const int64_t i = tj_gid % " + Tqs + ", h = tj_gid / " + Tqs + " % " + std::to_string(H) + "L, b = tj_gid / " + Tqs + " / " +
            std::to_string(H) + "L, g = h / " + G + ";\n";
    code += "  TJ_GLOBAL const " + st + "* const qr = " + row(q, "b", "h", "i") + ";\n  const int64_t limit = " + limit + ";\n";
    if (lse) {
      code += "  double m = -INFINITY, sum = 0;\n  for (int64_t j = 0; j < limit; ++j) {\n";
      code += "    TJ_GLOBAL const " + st + "* const kj = " + row(k, "b", "g", "j") + ";\n" + score;
      code += "    if (s == -INFINITY) continue;\n    if (s > m) { sum *= exp(m - s); m = s; }\n    sum += exp(s - m);\n  }\n";
      code += "  " + out + "[tj_gid] = " + stored(v0, rounded("(" + ty + ")(m == -INFINITY ? m : m + log(sum))", dt)) + ";\n";
      launch(&prog_.launches, "attn_lse", code, B * Dim(H) * Tq);
    } else {
      code += row_values() + "  double acc[" + Ds + "];\n  for (int d = 0; d < " + Ds + "; ++d) acc[d] = 0;\n";
      code += "  for (int64_t j = 0; j < limit; ++j) {\n";
      code += "    TJ_GLOBAL const " + st + "* const kj = " + row(k, "b", "g", "j") + ";\n";
      code += "    TJ_GLOBAL const " + st + "* const vj = " + row(v, "b", "g", "j") + ";\n" + score + probs;
      code += "      for (int64_t d = 0; d < " + Ds + "; ++d) acc[d] += ds * " + at("kj[d]") + ";\n  }\n";
      code += "  for (int d = 0; d < " + Ds + "; ++d) " + out + "[tj_gid*" + Ds + " + d] = " + stored(v0, rounded("(" + ty + ")(acc[d] * scale)", dt)) +
              ";\n";
      launch(&prog_.launches, "attn_dq", code, B * Dim(H) * Tq);
    }
  } else {
    // A work-item per key j of KV head g: the rows r of its query heads,
    // query r / G of head g*G + r % G, as flash_attn reads them.
    code += "  if (tj_gid >= " + C(B * Dim(Hkv) * S) + ") return;\n";
    code += "  const int64_t j = tj_gid % " + Ss + ", g = tj_gid / " + Ss + " % " + std::to_string(Hkv) + "L, b = tj_gid / " + Ss + " / " +
            std::to_string(Hkv) + "L;\n";
    code += "  TJ_GLOBAL const " + st + "* const kj = " + row(k, "b", "g", "j") + ";\n";
    code += "  TJ_GLOBAL const " + st + "* const vj = " + row(v, "b", "g", "j") + ";\n";
    code += "  double dk[" + Ds + "], dv[" + Dvs + "];\n  for (int d = 0; d < " + Ds + "; ++d) dk[d] = 0;\n  for (int d = 0; d < " + Dvs +
            "; ++d) dv[d] = 0;\n";
    code += "  for (int64_t r = 0; r < " + C(Tq * Dim(group)) + "; ++r) {\n    const int64_t i = r / " + G + ", h = g*" + G + " + r % " + G + ";\n";
    code += "    if (j >= " + limit + ") continue;\n    {\n      TJ_GLOBAL const " + st + "* const qr = " + row(q, "b", "h", "i") + ";\n";
    code += row_values() + score + probs;
    code += "      for (int64_t d = 0; d < " + Ds + "; ++d) dk[d] += ds * " + at("qr[d]") + ";\n";
    code += "      for (int64_t d = 0; d < " + Dvs + "; ++d) dv[d] += p * " + at("dO[d]") + ";\n    }\n  }\n";
    code += "  TJ_GLOBAL " + st + "* const o = " + out + " + tj_gid*" + std::to_string(D + Dv) + ";\n";
    code += "  for (int d = 0; d < " + Ds + "; ++d) o[d] = " + stored(v0, rounded("(" + ty + ")(dk[d] * scale)", dt)) + ";\n";
    code += "  for (int d = 0; d < " + Dvs + "; ++d) o[" + Ds + " + d] = " + stored(v0, rounded("(" + ty + ")dv[d]", dt)) + ";\n";
    launch(&prog_.launches, "attn_dkv", code, B * Dim(Hkv) * S);
  }
  if (K.ops.size() > 1) pointwise(K, 1);
}

}  // namespace tj::gpu
