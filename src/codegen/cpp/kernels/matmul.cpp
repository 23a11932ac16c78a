// The C++ emitter's matmul kernels: the runtime's GEMM per batch (column
// blocks on the pool; src/runtime/gemm.h), hand-written GEMVs for one row,
// then the epilogue.
#include "codegen/cpp/emitter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "tensorjit/error.h"

namespace tj::cpp {

// Operand x of a product as BLAS reads it: in place (row-major, or
// transposed) when its layout allows, else copied into a temporary first
// (appended to `code`). `rows` x `cols` is the matrix BLAS sees.
Emitter::BlasOperand Emitter::blas_operand(ValueId x, const Dim& rows, const Dim& cols, std::string* code) {
  auto at_least = [](const Dim& p, const Dim& q) { return p == q || (p - q).provably_positive(); };
  auto sx = shape(x);
  size_t rx = sx.size();
  auto fits = [&](const Strided& st, bool t) {
    const Dim &sr = st.strides[rx - 2], &sc = st.strides[rx - 1];
    return t ? (sr == Dim(1) && (cols == Dim(1) || at_least(sc, rows))) : (sc == Dim(1) && (rows == Dim(1) || at_least(sr, cols)));
  };
  auto st = strided(x);
  if (!st || (!fits(*st, false) && !fits(*st, true))) {
    make_temp_copy(x, code);
    st = Strided{x, 0, contiguous_strides(sx)};
  }
  BlasOperand o;
  bool t = !fits(*st, false);
  o.trans = t;
  o.ld = t ? (cols == Dim(1) ? rows : st->strides[rx - 1]) : (rows == Dim(1) ? cols : st->strides[rx - 2]);
  if (o.ld == Dim(0)) o.ld = Dim(1);
  o.p = ptr(st->base) + " + " + C(st->offset);
  o.batch_strides.assign(st->strides.begin(), st->strides.end() - 2);
  return o;
}

// GEMM per batch through the runtime (GEMV for one row), then the epilogue.
std::string Emitter::matmul_body(const Kernel& K) {
  ValueId mm = K.ops[0];
  const Node& n = g_.node(mm);
  ValueId a = n.inputs[0], b = n.inputs[1];
  auto so = shape(mm), sa = shape(a), sb = shape(b);
  size_t r = so.size();
  Dim M = so[r - 2], N = so[r - 1], Kd = sa.back();
  std::string code;
  if (is_narrow_float(n.type.dtype)) return loop_matmul(K);
  std::string ty = T(mm);
  if (ty != "float" && ty != "double") throw Error("code generation: matmul of " + ty);
  // Weights stored narrower (quantize_weights): a one-row product reads them
  // as they are, converting in registers; a larger one converts them into a
  // temporary for the GEMM (compute-bound: the conversion is cheap there).
  BlasOperand A0 = blas_operand(a, M, Kd, &code);
  auto narrow = narrow_weights(b);
  if (narrow && !(M == Dim(1) && !A0.trans && count(Sizes(so.begin(), so.end() - 2)) == Dim(1))) narrow.reset();
  WeightRead wr = narrow ? narrow->first : WeightRead{};
  reads_narrow_weights_ |= narrow.has_value();
  BlasOperand B0 = narrow ? BlasOperand{ptr(narrow->second) + " + 0", false, N, {}} : blas_operand(b, Kd, N, &code);
  // x @ W with W one matrix and x's rows contiguous across its batch dims
  // (a channels-last Linear over [1, H, W, C]): one product of all the rows.
  Sizes batch(so.begin(), so.end() - 2);
  const Sizes dense = contiguous_strides(sa);
  if (sb.size() == 2 && !A0.trans && !narrow && count(batch) != Dim(1) && A0.ld == Kd && Sizes(sa.begin(), sa.end() - 2) == batch &&
      A0.batch_strides == Sizes(dense.begin(), dense.end() - 2)) {
    M = count(batch) * M;
    batch.clear();
    A0.batch_strides.clear();
    sa = {M, Kd};
  }
  const std::string &pa = A0.p, &pb = B0.p;
  const bool ta = A0.trans, tb = B0.trans;
  const Dim &lda = A0.ld, &ldb = B0.ld;
  const Sizes &bsa = A0.batch_strides, &bsb = B0.batch_strides;
  // Batch loop (numpy-broadcast batch dims).
  Idx bv = loop_vars(batch.size(), "b");
  auto batch_offset = [&](const Sizes& bs, const Sizes& sx) {
    std::string e = "0";
    size_t off = batch.size() - bs.size();
    for (size_t d = 0; d < bs.size(); ++d)
      if (sx[d] != Dim(1) && bs[d] != Dim(0)) e += "+" + bv[d + off] + "*" + C(bs[d]);
    return e;
  };
  Sizes sab(sa.begin(), sa.end() - 2), sbb(sb.begin(), sb.end() - 2);
  std::string c_ptr = ptr(mm) + " + (" + flat(bv, batch) + ")*" + C(M * N);
  std::string call;
  bool stores = false, epilogue_in_blocks = false;
  for (ValueId v : K.ops) stores |= g_.node(v).def().fuse == Fuse::store;
  int64_t weights = hint(Kd * N);
  bool team = M == Dim(1) && !ta && count(batch) == Dim(1) && code.empty() && !stores && weights >= kTeamSplitElements &&
              weights < kGemvParallelElements;
  const bool gemv_path = M == Dim(1) && !ta;
  const bool par = !team && weights >= kGemvParallelElements;  // a GEMV split over the pool
  // A GEMV's columns [n0, n1) per thread of the pool (`columns` defines them).
  auto columns_per_thread = [&](const std::string& columns, const std::string& body) {
    return "  {\n" + open_parallel("tj_threads(" + pool() + ")") + "    {\n      const int nt = (int)tj_parts, id = (int)tj_part;\n" +
           columns + body + "    }\n" + close_parallel() + "  }\n";
  };
  if (gemv_path && !tb && !wr.packed) {
    // Tuning: weight rows per pass, and a large GEMV's split (partial sums
    // over K, or columns); the rule's first.
    if (tune_ && knobs_.label.empty()) {
      std::vector<int> rows = {wr.rows, 2 * wr.rows};
      if (wr.rows / 2 >= 4) rows.push_back(wr.rows / 2);
      for (bool columns : {false, true}) {
        if (columns && !par) break;
        for (int r : rows)
          alternatives_.push_back({r, columns, 0, 0, "rows " + std::to_string(r) + (par ? columns ? ", columns" : ", partials" : "")});
      }
      // The sizes as the code reads them and as measured (at the hint), and the batch.
      tuning_signature_ = "gemv " + ty + " weights " + (wr.type.empty() ? ty : wr.type) + " K=" + C(Kd) + " N=" + C(N) + " ldb=" + C(ldb) +
                          (team ? " team" : par ? " parallel" : "") + " at K " + std::to_string(hint(Kd)) + ", N " +
                          std::to_string(hint(N)) + ", batch " + std::to_string(hint(count(Sizes(so.begin(), so.end() - 2))));
    }
    if (knobs_.gemv_rows > 0) wr.rows = knobs_.gemv_rows;
  }
  const std::string xa = pa + " + (" + batch_offset(bsa, sab) + ")", xb = pb + " + (" + batch_offset(bsb, sbb) + ")";
  if (wr.packed) {
    // Blocks of 16 columns split over the threads: no partial sums, and a
    // column's rounding the same at any thread count.
    if (team) team_work_ = weights, code += packed_columns_of(N);
    std::string body = gemv_packed(xa, xb, c_ptr, Kd);
    call = team  ? body
           : par ? columns_per_thread(packed_columns_of(N), body)
                 : "  {\n    const int64_t n0 = 0, n1 = " + C(N) + ";\n" + body + "  }\n";
  } else if (team) {
    team_work_ = weights;
    code += columns_of(N);
    call = gemv_columns(g_.type(mm).dtype, xa, xb, tb, ldb, c_ptr, Kd, N, wr);
  } else if (gemv_path && knobs_.gemv_columns) {
    // Each thread its own columns, every column's sum over all of K.
    call = columns_per_thread(columns_of(N), gemv_columns(g_.type(mm).dtype, xa, xb, tb, ldb, c_ptr, Kd, N, wr));
  } else if (gemv_path) {
    call = gemv(ty, xa, xb, tb, ldb, c_ptr, Kd, N, wr);
  } else {
    if (narrow) throw Error("code generation: narrow weights outside a one-row product");
    // The GEMM runs single-threaded; large products are split over output
    // columns on the pool, so the matrix library and the other kernels share
    // one set of threads instead of fighting over the cores. Column blocks
    // are fixed by N, not by the thread count: a GEMM may round a column
    // differently in blocks of other widths.
    bool split = hint(M * N * Kd) >= kSplitMatmul && hint(N) >= 128;
    std::string blocks = "tj_matmul_blocks(" + C(N) + ")";
    std::string A = pa + " + (" + batch_offset(bsa, sab) + ")", Bp = pb + " + (" + batch_offset(bsb, sbb) + ")";
    std::string colB = tb ? "n0*" + C(ldb) : "n0";
    // Too few columns to split (a convnet's channels-last Linear, 3136 rows
    // by 96): blocks of rows instead, fixed by M.
    if (!split && hint(M * N * Kd) >= kSplitMatmul && hint(M) >= 256) {
      const std::string rowA = ta ? "m0" : "m0*" + C(lda);
      call = "  {\n" + open_parallel("tj_matmul_blocks(" + C(M) + ")");
      call += "    {\n      const int nt = (int)tj_parts, id = (int)tj_part;\n";
      call += "      const int64_t m0 = " + C(M) + " * id / nt / 16 * 16, m1 = id + 1 == nt ? " + C(M) + " : " + C(M) + " * (id + 1) / nt / 16 * 16;\n";
      call += "      if (m1 > m0) tj_gemm(" + pool() + ", " + (ta ? "true" : "false") + ", " + (tb ? "true" : "false") + ", m1 - m0, " + C(N) + ", " + C(Kd) +
              ", " + A + " + " + rowA + ", " + C(lda) + ", " + Bp + ", " + C(ldb) + ", " + c_ptr + " + m0*" + C(N) + ", " + C(N) + ");\n";
      call += "    }\n" + close_parallel() + "  }\n";
      code += loops(batch, bv, call, false, false);
      code += pointwise_body(K, 1, team);
      return code;
    }
    call = "  {\n";
    call += split ? open_parallel(blocks) : "";
    // Not split: one thread, even when called inside a split kernel.
    call += split ? "    {\n      const int nt = (int)tj_parts, id = (int)tj_part;\n" : "    {\n      const int nt = 1, id = 0;\n";
    call += "      const int64_t n0 = " + C(N) + " * id / nt / 16 * 16, n1 = id + 1 == nt ? " + C(N) + " : " + C(N) +
            " * (id + 1) / nt / 16 * 16;\n";
    call += "      if (n1 > n0) tj_gemm(" + pool() + ", " + (ta ? "true" : "false") + ", " + (tb ? "true" : "false") + ", " + C(M) +
            ", n1 - n0, " + C(Kd) + ", " + A + ", " + C(lda) + ", " + Bp + " + " + colB + ", " + C(ldb) + ", " + c_ptr + " + n0, " + C(N) +
            ");\n";
    // One product: each block runs the epilogue over its own columns
    // while they are in cache, instead of one thread over all of them.
    epilogue_in_blocks = split && count(batch) == Dim(1) && !stores && K.ops.size() > 1;
    if (epilogue_in_blocks) call += pointwise_body(K, 1, true);
    call += "    }\n" + (split ? close_parallel() : "") + "  }\n";
  }
  code += loops(batch, bv, call, false, false);
  if (!epilogue_in_blocks) code += pointwise_body(K, 1, team);
  return code;
}

// f16/bf16 products as loops (no 16-bit GEMM in the runtime yet): each
// output a float dot product over K, in order, rounded once as the
// interpreter rounds it; the operands read through their views and
// broadcast batch dims. Then the epilogue.
std::string Emitter::loop_matmul(const Kernel& K) {
  ValueId mm = K.ops[0];
  const Node& n = g_.node(mm);
  ValueId a = n.inputs[0], b = n.inputs[1];
  auto so = shape(mm), sa = shape(a);
  size_t r = so.size();
  Dim Kd = sa.back();
  Idx ov = loop_vars(r, "m");
  Idx batch(ov.begin(), ov.end() - 2);
  Sizes oa(so.begin(), so.end() - 2), ob = oa;
  oa.push_back(so[r - 2]), oa.push_back(Kd);
  ob.push_back(Kd), ob.push_back(so[r - 1]);
  Idx ia = batch, ib = batch;
  ia.push_back(ov[r - 2]), ia.push_back("k");
  ib.push_back("k"), ib.push_back(ov[r - 1]);
  std::string body = "  float acc = 0;\n  for (int64_t k = 0; k < " + C(Kd) + "; ++k) acc += " + load(a, broadcast(a, oa, ia)) + " * " +
                     load(b, broadcast(b, ob, ib)) + ";\n  " + ptr(mm) + "[" + flat(ov, so) + "] = acc;\n";
  return loops(so, ov, body, true, false) + pointwise_body(K, 1);
}

// This thread's columns [n0, n1) of N, in whole vectors.
std::string Emitter::columns_of(const Dim& N) {
  std::string Ns = C(N);
  return "  const int64_t n0 = " + Ns + " * id / nt / 8 * 8, n1 = id + 1 == nt ? " + Ns + " : " + Ns + " * (id + 1) / nt / 8 * 8;\n";
}

// 16 weights stored narrower as floats, widened and converted in one 512-bit
// register (8 int8 ones in a 256-bit register with AVX2 alone, for the packed
// GEMV; GCC 12 scalarizes __builtin_convertvector from 8-bit lanes). Only
// in programs that read such weights: <immintrin.h> adds 0.3-0.4 s to a
// compile.
std::string Emitter::narrow_weight_helpers() {
  return "#if defined(__AVX512F__) || defined(__AVX2__)\n#include <immintrin.h>\n#endif\n"
         "#ifdef __AVX2__\n"
         "typedef float tj_vf8 __attribute__((vector_size(32)));\n"
         "typedef float tj_vf8u __attribute__((vector_size(32), aligned(4)));\n"
         "static inline tj_vf8 tj_wv8_i8(const int8_t* p) {\n"
         "  return (tj_vf8)_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)p)));\n}\n#endif\n"
         "#ifdef __AVX512F__\n"
         "static inline tj_vf16 tj_wv_i8(const int8_t* p) {\n"
         "  return (tj_vf16)_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)p)));\n}\n"
         "static inline tj_vf16 tj_wv_bf16(const uint16_t* p) {\n"
         "  return (tj_vf16)_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)p)), 16));\n}\n"
         "#endif\n\n";
}

std::optional<std::pair<Emitter::WeightRead, ValueId>> Emitter::narrow_weights(ValueId b) const {
  const Node& n = g_.node(b);
  if (n.op != Op::cast || n.type.dtype != DType::f32) return std::nullopt;
  const ValueId w = n.inputs[0];
  auto stored = [&](const Node& c) { return c.op == Op::param || (c.op == Op::constant && c.const_data()->size() > 1); };
  // Packed: reshape(permute(Wp [N/16, K, 16], [1, 0, 2]), [K, N]).
  if (const Node& r = g_.node(w); r.op == Op::reshape && g_.node(r.inputs[0]).op == Op::permute) {
    const Node& p = g_.node(r.inputs[0]);
    const Node& c = g_.node(p.inputs[0]);
    const Shape& cs = c.type.shape;
    if (stored(c) && c.type.dtype == DType::i8 && p.attr_ints("perm") == std::vector<int64_t>{1, 0, 2} && cs.size() == 3 &&
        cs[2] == Dim(16) && r.type.shape == Shape{cs[1], cs[0] * Dim(16)}) {
      WeightRead wr{"int8_t", "(float)", "", "tj_wv_i8", 16};
      wr.packed = true;
      return std::make_pair(wr, p.inputs[0]);
    }
    return std::nullopt;
  }
  const Node& c = g_.node(w);
  // A constant, or the param the program cache made of it.
  if (!stored(c) || c.type.rank() != 2) return std::nullopt;
  if (c.type.dtype == DType::bf16) return std::make_pair(WeightRead{"uint16_t", "tj_bf16_value(", ")", "tj_wv_bf16", 8}, w);
  if (c.type.dtype == DType::i8) return std::make_pair(WeightRead{"int8_t", "(float)", "", "tj_wv_i8", 16}, w);
  return std::nullopt;
}

// This thread's blocks of 16 columns of N (a multiple of 16).
std::string Emitter::packed_columns_of(const Dim& N) {
  std::string B = C(N) + " / 16";
  return "  const int64_t n0 = " + B + " * id / nt * 16, n1 = " + B + " * (id + 1) / nt * 16;\n";
}

std::string Emitter::gemv_packed(const std::string& x, const std::string& B, const std::string& y, const Dim& K) {
  std::string Ks = C(K);
  std::string c = "  {\n    const float* x = " + x + ";\n    const int8_t* B = (const int8_t*)(" + B + ");\n    float* y = " + y + ";\n";
  c += "    for (int64_t j = n0; j < n1; j += 16) {\n      const int8_t* p = B + j*" + Ks + ";\n";
  // Four sums per column over k mod 4, then (s0 + s1) + (s2 + s3) and the
  // rest of k: the same order with AVX-512 (16 columns a vector), AVX2 (8)
  // or neither.
  auto vectors = [&](const std::string& V, const std::string& read, int width) {
    std::string w = std::to_string(width);
    std::string v = "      for (int h = 0; h < 16; h += " + w + ") {\n        const int8_t* ph = p + h;\n        int64_t k = 0;\n";
    v += "        " + V + " s0 = {}, s1 = {}, s2 = {}, s3 = {};\n        for (; k + 4 <= " + Ks + "; k += 4, ph += 64) {\n";
    for (int q = 0; q < 4; ++q)
      v += "          s" + std::to_string(q) + " += x[k+" + std::to_string(q) + "]*" + read + "(ph + " + std::to_string(16 * q) + ");\n";
    v += "        }\n        " + V + " s = (s0 + s1) + (s2 + s3);\n        for (; k < " + Ks + "; ++k, ph += 16) s += x[k]*" + read + "(ph);\n";
    return v + "        *(" + V + "u*)&y[j + h] = s;\n      }\n";
  };
  c += "#ifdef __AVX512F__\n" + vectors("tj_vf16", "tj_wv_i8", 16) + "#elif defined(__AVX2__)\n" + vectors("tj_vf8", "tj_wv8_i8", 8);
  c += "#else\n      float s[4][16] = {};\n      int64_t k = 0;\n";
  c += "      for (; k + 4 <= " + Ks + "; k += 4, p += 64)\n        for (int q = 0; q < 4; ++q)\n#pragma omp simd\n";
  c += "          for (int l = 0; l < 16; ++l) s[q][l] += x[k+q]*(float)p[16*q + l];\n";
  c += "      for (int l = 0; l < 16; ++l) {\n        float t = (s[0][l] + s[1][l]) + (s[2][l] + s[3][l]);\n";
  c += "        for (int64_t kk = k; kk < " + Ks + "; ++kk) t += x[kk]*(float)p[16*(kk - k) + l];\n        y[j + l] = t;\n      }\n#endif\n";
  c += "    }\n  }\n";
  return c;
}

// R rows of B from row k: their x values a0.. and pointers r0...
std::string Emitter::row_pointers(const std::string& ty, const std::string& wt, const std::string& lds, int R, const std::string& at) {
  std::string c = at + "const " + ty;
  for (int r = 0; r < R; ++r) c += (r ? ", a" : " a") + std::to_string(r) + " = x[k+" + std::to_string(r) + "]";
  c += ";\n" + at + "const " + wt + "* r0 = B + k*" + lds + ";\n";
  for (int r = 1; r < R; ++r) c += at + "const " + wt + "* r" + std::to_string(r) + " = r" + std::to_string(r - 1) + " + " + lds + ";\n";
  return c;
}

std::string Emitter::rows_into(const WeightRead& w, int rows, const std::string& j0, const std::string& j1, const std::string& at) {
  auto sum = [&](const auto& elem) {
    std::string e;
    for (int r = 0; r < rows; ++r) {
      std::string a = rows == 1 ? "a" : "a" + std::to_string(r), row = rows == 1 ? "row" : "r" + std::to_string(r);
      e += (r ? " + " : "") + a + "*" + elem(row);
    }
    return e;
  };
  if (w.vector.empty())
    return "#pragma omp simd\n" + at + "for (int64_t j = " + j0 + "; j < " + j1 + "; ++j) acc[j] += " +
           sum([&](const std::string& r) { return w.at(r + "[j]"); }) + ";\n";
  // With AVX-512: 16 lanes in one register whatever width the
  // autovectorizer prefers, each weight widened and converted there. The
  // rest (or everything, without AVX-512) one at a time, vectorized by GCC.
  std::string c = at + "int64_t j = " + j0 + ";\n#ifdef __AVX512F__\n";
  c += at + "for (; j + 16 <= " + j1 + "; j += 16) *(tj_vf16u*)&acc[j] += " +
       sum([&](const std::string& r) { return w.vector + "(" + r + " + j)"; }) + ";\n#endif\n";
  c += "#pragma omp simd\n" + at + "for (int64_t jj = j; jj < " + j1 + "; ++jj) acc[jj] += " +
       sum([&](const std::string& r) { return w.at(r + "[jj]"); }) + ";\n";
  return c;
}

// Rows [n, min(n + 4, n_end)) of a one-row product by a transposed f32
// matrix B [N, K] (row stride lds): each row a sum of 16-lane vectors over
// k (tj_per16 of the CPU's own each), then its lanes in order and the rest
// of k. Every x vector is read once
// for four rows, and the vectors are written out rather than left to the
// vectorizer, which made the loop over rows the vector one (gathers from 16
// rows: 14 GB/s on vgg11's 411 MB classifier weight, against 46 streamed).
std::string Emitter::transposed_rows(const std::string& Ks, const std::string& lds, const std::string& n_end) {
  std::string c = "      const int64_t rows = std::min<int64_t>(4, " + n_end + " - n);\n      const float* r[4];\n";
  c += "      for (int i = 0; i < 4; ++i) r[i] = B + (n + (i < rows ? i : 0))*" + lds + ";\n";
  c += "      tj_vfn s[4][tj_per16] = {};\n      int64_t k = 0;\n";
  c += "      for (; k + 16 <= " + Ks + "; k += 16)\n#pragma GCC unroll 4\n        for (int u = 0; u < tj_per16; ++u) {\n";
  c += "          const tj_vfn xv = *(const tj_vfnu*)(x + k + u*tj_lanes);\n";
  c += "#pragma GCC unroll 4\n          for (int i = 0; i < 4; ++i) s[i][u] += xv * *(const tj_vfnu*)(r[i] + k + u*tj_lanes);\n        }\n";
  c += "      for (int i = 0; i < rows; ++i) {\n        float acc = 0;\n";
  c += "        for (int u = 0; u < tj_per16; ++u)\n          for (int l = 0; l < tj_lanes; ++l) acc += s[i][u][l];\n";
  return c + "        for (int64_t kk = k; kk < " + Ks + "; ++kk) acc += x[kk]*r[i][kk];\n        y[n + i] = acc;\n      }\n";
}

// y[n0, n1) of y[N] = x[K] @ B, for B row-major [K, N] (ldb) or transposed
// [N, K]: each thread reads only its own columns of B, the same ones every
// call.
std::string Emitter::gemv_columns(DType dtype, const std::string& x, const std::string& B, bool transposed, const Dim& ldb,
                                  const std::string& y, const Dim& K, const Dim& N, const WeightRead& w) {
  std::string ty = ctype(dtype), wt = w.type.empty() ? ty : w.type;
  std::string Ks = C(K), lds = C(ldb);
  std::string c = "  {\n    const " + ty + "* x = " + x + ";\n    const " + wt + "* B = (const " + wt + "*)(" + B + ");\n    " + ty +
                  "* y = " + y + ";\n";
  if (transposed && ty == "float" && wt == "float") return c + "    for (int64_t n = n0; n < n1; n += 4) {\n" + transposed_rows(Ks, lds, "n1") + "    }\n  }\n";
  if (transposed) {
    c += "    for (int64_t n = n0; n < n1; ++n) {\n      const " + wt + "* row = B + n*" + lds + ";\n      " + ty + " acc = 0;\n";
    c += "#pragma omp simd reduction(+:acc)\n      for (int64_t k = 0; k < " + Ks + "; ++k) acc += x[k]*" + w.at("row[k]") +
         ";\n      y[n] = acc;\n    }\n  }\n";
    return c;
  }
  // w.rows rows of B per pass over this thread's accumulator (in L1, in its
  // own scratch: no cache line shared with another thread's part of y): a
  // fraction of the accumulator traffic, B streamed row by row.
  std::string per = scratch(N * static_cast<int64_t>(dtype_size(dtype)));
  c += "    " + ty + "* acc = (" + ty + "*)((char*)" + slot(tj_slot_scratch) + " + tj_thread*" + per + ");\n";
  const int R = w.rows;
  c += "    for (int64_t j = n0; j < n1; ++j) acc[j] = 0;\n    int64_t k = 0;\n    for (; k + " + std::to_string(R) + " <= " + Ks +
       "; k += " + std::to_string(R) + ") {\n";
  c += row_pointers(ty, wt, lds, R, "      ");
  c += rows_into(w, R, "n0", "n1", "      ") + "    }\n";
  c += "    for (; k < " + Ks + "; ++k) {\n      const " + ty + " a = x[k];\n      const " + wt + "* row = B + k*" + lds + ";\n";
  c += rows_into(w, 1, "n0", "n1", "      ") + "    }\n";
  c += "    for (int64_t j = n0; j < n1; ++j) y[j] = acc[j];\n  }\n";
  return c;
}

// y[N] = x[K] @ B: B row-major [K, N] (ldb), or transposed [N, K]. Bound by
// reading B once: for [K, N], each thread streams its own rows of B into a
// private partial y (in scratch), then the partials are summed; for [N, K],
// each output is one contiguous dot product. Threads only when B is large.
std::string Emitter::gemv(const std::string& ty, const std::string& x, const std::string& B, bool transposed, const Dim& ldb,
                          const std::string& y, const Dim& K, const Dim& N, const WeightRead& w) {
  bool par = hint(K * N) >= kGemvParallelElements;
  std::string Ks = C(K), Ns = C(N), lds = C(ldb), wt = w.type.empty() ? ty : w.type;
  std::string c = "  {\n    const " + ty + "* x = " + x + ";\n    const " + wt + "* B = (const " + wt + "*)(" + B + ");\n    " + ty +
                  "* y = " + y + ";\n";
  if (transposed && ty == "float" && wt == "float") {
    const std::string groups = "((" + Ns + " + 3) / 4)";
    c += par ? open_parallel_loop("g", groups, false) : "    for (int64_t g = 0; g < " + groups + "; ++g) {\n";
    c += "      const int64_t n = g*4;\n" + transposed_rows(Ks, lds, Ns);
    c += (par ? close_parallel_loop() : "    }\n") + "  }\n";
    return c;
  }
  if (transposed) {
    c += par ? open_parallel_loop("n", Ns, false) : "    for (int64_t n = 0; n < " + Ns + "; ++n) {\n";
    c += "      const " + wt + "* row = B + n*" + lds + ";\n      " + ty + " acc = 0;\n";
    c += "#pragma omp simd reduction(+:acc)\n      for (int64_t k = 0; k < " + Ks + "; ++k) acc += x[k]*" + w.at("row[k]") +
         ";\n      y[n] = acc;\n";
    c += (par ? close_parallel_loop() : "    }\n") + "  }\n";
    return c;
  }
  // A fixed number of partial sums (the result's rounding does not depend
  // on the thread count), each in its own slot of the first thread's scratch.
  const int partials = par ? kGemvPartials : 1;
  std::string per = scratch(N * static_cast<int64_t>(sizeof(double)));
  out_.scratch_sizes.back() = (N * static_cast<int64_t>(sizeof(double)) + 64) * partials;
  c += "    char* scratch = (char*)" + slot(tj_slot_scratch) + ";\n";
  c += "    const int used = " + std::to_string(partials) + ";\n";
  c += par ? open_parallel("used") : "";
  c += "    {\n      const int nt = used, id = " + std::string(par ? "(int)tj_part" : "0") + ";\n";
  c += "      const int64_t k0 = " + Ks + " * id / nt, k1 = " + Ks + " * (id + 1) / nt;\n";
  c += "      " + ty + "* acc = (" + ty + "*)(scratch + id*" + per + ");\n";
  c += "      std::memset(acc, 0, sizeof(" + ty + ")*" + Ns + ");\n";
  // w.rows rows per pass: a fraction of the accumulator traffic.
  const int R = w.rows;
  c += "      int64_t k = k0;\n      for (; k + " + std::to_string(R) + " <= k1; k += " + std::to_string(R) + ") {\n";
  c += row_pointers(ty, wt, lds, R, "        ");
  c += rows_into(w, R, "0", Ns, "        ") + "      }\n";
  c += "      for (; k < k1; ++k) {\n        const " + ty + " a = x[k];\n        const " + wt + "* row = B + k*" + lds + ";\n";
  c += rows_into(w, 1, "0", Ns, "        ") + "      }\n    }\n";
  c += par ? close_parallel() : "";
  c += "    for (int64_t j = 0; j < " + Ns + "; ++j) {\n      " + ty + " s = 0;\n";
  c += "      for (int p = 0; p < used; ++p) s += ((" + ty + "*)(scratch + p*" + per + "))[j];\n      y[j] = s;\n    }\n  }\n";
  return c;
}

}  // namespace tj::cpp
