// The C++ emitter's stores: concat, kv_write and scatter_add, as copy loops
// between a pointwise kernel's loop nests (emit.cpp's pointwise_body calls
// store() for each).
#include "codegen/cpp/emitter.h"

namespace tj::cpp {

// concat and kv_write as copy loops.
std::string Emitter::store(ValueId v) {
  const Node& n = g_.node(v);
  std::string code;
  if (n.op == Op::concat) {
    const auto so = shape(v);
    if (static_cast<size_t>(n.attr_int("axis")) + 1 == so.size() && so.size() >= 2) return concat_last(v);
    for (const ConcatPart& c : concat_parts(v))
      code += loops(shape(c.input), c.at, "  " + ptr(v) + "[" + flat(c.into, shape(v)) + "] = " + load(c.input, c.at) + ";\n");
    return code;
  }
  if (n.op == Op::scatter_add) return scatter_add(v);
  // kv_write: in place, the output is the cache itself; otherwise copy the
  // cache first. Then write the rows at pos.
  ValueId rows = n.inputs[1];
  auto sr = shape(rows), sc = shape(n.inputs[0]);
  size_t axis = static_cast<size_t>(n.attr_int("axis"));
  if (!s_.writes_in_place(v)) {
    Idx all = loop_vars(sc.size(), "c");
    code += loops(sc, all, "  " + ptr(v) + "[" + flat(all, sc) + "] = " + load(n.inputs[0], all) + ";\n");
  }
  Idx iv = loop_vars(sr.size(), "c");
  Idx ci = iv;
  ci[axis] = "(" + iv[axis] + "+pos)";
  code += "{\n  const int64_t pos = (int64_t)(" + load(n.inputs[2], {}) + ");\n";
  code += "  if (pos < 0 || pos + " + C(sr[axis]) + " > " + C(sc[axis]) + ") { tj_status = tj_status_kv_write_outside; return; }\n";
  code += loops(sr, iv, "  " + ptr(v) + "[" + flat(ci, sc) + "] = " + load(rows, iv) + ";\n");
  return code + "}\n";
}

// concat along the last axis (channels-last features, a rotation's halves):
// one pass over the rows, each input's run copied in turn, in one parallel
// loop, not a loop nest per input (densenet121's concats of up to 32 inputs
// made 500 nests, most of its build time).
std::string Emitter::concat_last(ValueId v) {
  const Node& n = g_.node(v);
  const auto so = shape(v);
  const Idx at = unflat("tj_q", Sizes(so.begin(), so.end() - 1));
  std::string body;
  Dim off = 0;
  for (ValueId in : n.inputs) {
    const Dim len = shape(in).back();
    Idx from = at, to = at;
    from.push_back("tj_c"), to.push_back("(tj_c+" + C(off) + ")");
    body += "#pragma omp simd\n    for (int64_t tj_c = 0; tj_c < " + C(len) + "; ++tj_c) " + ptr(v) + "[" + flat(to, so) + "] = " + load(in, from) + ";\n";
    off = off + len;
  }
  return row_pass(so, "", body);
}

// `body` for each row tj_q of `so` (every dim but the last), the rows split
// over the pool where there are enough elements; `head` before the split.
std::string Emitter::row_pass(const Sizes& so, const std::string& head, const std::string& body) {
  const Dim rows = count(Sizes(so.begin(), so.end() - 1));
  const bool par = hint(count(so)) >= kParallelElements && hint(rows) > 1;
  std::string code = "{\n  const int64_t tj_rows = " + C(rows) + ";\n" + head;
  code += par ? open_parallel("std::min<int64_t>(tj_rows, " + split_parts() + ")") +
                    "  const int64_t tj_q0 = tj_rows*tj_part/tj_parts, tj_q1 = tj_rows*(tj_part + 1)/tj_parts;\n"
              : std::string("  const int64_t tj_q0 = 0, tj_q1 = tj_rows;\n");
  code += "  for (int64_t tj_q = tj_q0; tj_q < tj_q1; ++tj_q) {\n" + body + "  }\n";
  if (par) code += close_parallel();
  return code + "}\n";
}

// One pass over the rows; per row, each input's run in turn, its elements
// the concat's value for the ops [i + 1, end) at (row, the run's offset +
// c). Up to kConcatRunsInline inputs each get their loop, with constant
// bounds (a rotation's halves); more are found in a table by one loop
// (densenet121's concats of up to 32 inputs made 500 loops, most of its
// build time). The concat is stored where it lives in memory.
std::string Emitter::concat_pass(const Kernel& K, size_t i, size_t end) {
  constexpr size_t kConcatRunsInline = 4;
  const ValueId v = K.ops[i];
  const Node& n = g_.node(v);
  const auto so = shape(v);
  std::vector<std::string> src, len, off;
  Dim at = 0;
  for (ValueId in : n.inputs) {
    const Strided st = *strided(in);
    src.push_back("(const " + T(v) + "*)" + ptr(st.base) + " + " + C(st.offset));
    len.push_back(C(shape(in).back()));
    off.push_back(C(at));
    at = at + shape(in).back();
  }
  // The loop over one run: tj_s its row, tj_at its offset, tj_n its length.
  Idx iv = unflat("tj_q", Sizes(so.begin(), so.end() - 1));
  iv.push_back("(tj_at+tj_c)");
  local_.clear();
  const std::string cv = "v" + std::to_string(v);
  std::string inner = "        const " + CT(v) + " " + cv + " = tj_s[tj_c];\n", stores;
  if (in_mem_[static_cast<size_t>(v)] || is_temp(v)) stores += "        " + ptr(v) + "[" + flat(iv, so) + "] = " + cv + ";\n";
  local_[v] = cv;
  for (size_t j = i + 1; j < end; ++j) append_statement(K.ops[j], iv, so, "        ", &inner, &stores);
  local_.clear();
  const std::string run = "#pragma omp simd\n      for (int64_t tj_c = 0; tj_c < tj_n; ++tj_c) {\n" + inner + stores + "      }\n";
  if (src.size() > kConcatRunsInline) {
    const std::string N = std::to_string(src.size());
    return row_pass(so, "  const " + T(v) + "* const tj_src[" + N + "] = {" + comma_list(src) + "};\n  const int64_t tj_len[" + N + "] = {" + comma_list(len) + "};\n",
                    "    int64_t tj_at = 0;\n    for (int tj_i = 0; tj_i < " + N + "; ++tj_i) {\n      const " + T(v) +
                        "* const tj_s = tj_src[tj_i] + tj_q*tj_len[tj_i];\n      const int64_t tj_n = tj_len[tj_i];\n" + run + "      tj_at += tj_n;\n    }\n");
  }
  std::string body;
  for (size_t k = 0; k < src.size(); ++k)
    body += "    {\n      const " + T(v) + "* const tj_s = " + src[k] + " + tj_q*" + len[k] + ";\n      const int64_t tj_at = " + off[k] + ", tj_n = " + len[k] +
            ";\n" + run + "    }\n";
  return row_pass(so, "", body);
}

// scatter_add: the base copied, then each update slice added at its index,
// in the indices' order. The columns (the dims after the axis) are split
// over the pool, so every element's sum runs in one order on one thread, as
// the interpreter's.
std::string Emitter::scatter_add(ValueId v) {
  const Node& n = g_.node(v);
  const size_t axis = static_cast<size_t>(n.attr_int("axis"));
  auto so = shape(v), si = shape(n.inputs[1]);
  const Sizes before(so.begin(), so.begin() + static_cast<std::ptrdiff_t>(axis)), after(so.begin() + static_cast<std::ptrdiff_t>(axis) + 1, so.end());
  const Dim P = count(before), L = so[axis], N = count(si), S = count(after);
  Idx all = loop_vars(so.size(), "c");
  std::string code = loops(so, all, "  " + ptr(v) + "[" + flat(all, so) + "] = " + load(n.inputs[0], all) + ";\n");
  Idx upd = unflat("p", before), in = unflat("k", si), col = unflat("s", after);
  upd.insert(upd.end(), in.begin(), in.end());
  upd.insert(upd.end(), col.begin(), col.end());
  const bool par = hint(P * N * S) >= kParallelElements && hint(S) >= 64;
  code += "{\n  const int64_t tj_cols = " + C(S) + ";\n";
  code += par ? open_parallel("std::min<int64_t>(tj_cols / 16, " + split_parts() + ")") +
                    "  const int64_t s0 = tj_cols*tj_part/tj_parts, s1 = tj_cols*(tj_part + 1)/tj_parts;\n"
              : std::string("  const int64_t s0 = 0, s1 = tj_cols;\n");
  code += "  for (int64_t p = 0; p < " + C(P) + "; ++p)\n    for (int64_t k = 0; k < " + C(N) + "; ++k) {\n";
  code += "      const int64_t i = tj_index((int64_t)(" + load(n.inputs[1], in) + "), " + C(L) + ");\n";
  code += "      " + T(v) + "* to = " + ptr(v) + " + (p*" + C(L) + " + i)*tj_cols;\n";
  code += "#pragma omp simd\n      for (int64_t s = s0; s < s1; ++s) to[s] = " +
          rounded("(" + CT(v) + ")to[s] + " + load(n.inputs[2], upd), g_.type(v).dtype) + ";\n    }\n";
  code += par ? close_parallel() : "";
  return code + "}\n";
}

}  // namespace tj::cpp
