// quantize_weights: the constant weights of matrix products stored in a
// narrower format (PassOptions::weights), read converted by the product:
//   bf16:  x @ W  ->  x @ cast(Wb, f32)         Wb = W rounded to nearest even
//   i8:    x @ W  ->  (x @ cast(Wq, f32)) * s   per output column n:
//          s[n] = max_k |W[k, n]| / 127, Wq = round(W / s), in [-127, 127]
// (symmetric, per output channel). The scale factors out of the sum over k,
// so it is the product's epilogue. Decode reads the weights once per token:
// half or a quarter of the bytes is what makes it faster (the code generator
// reads Wb and Wq directly, converting in registers; docs/codegen.md).
// Assumes frozen weights: run after freeze, constant_fold and merge_matmuls,
// and before anything that would fold the casts back (no constant_fold
// after it). Applies to f32 weights of rank 2 with at least
// kMinElements elements (smaller ones are not worth a second format).
// Changes values: the error is that of the format, reported by
// `tjc bench --weights` (docs/results.md).
//
// An int8 weight that only one-row products read (decode) is stored packed:
// Wp[N/16, K, 16], Wp[b, k, l] = Wq[k, 16b + l], read as
// reshape(permute(Wp, [1, 0, 2]), [K, N]), the same matrix. Each block of 16
// output columns is then one contiguous stream that the GEMV reads start to
// end, where row-major rows of a few KiB made it read many short runs
// (docs/codegen.md has the figures).
#include <algorithm>
#include <cmath>

#include "ir/rewriter.h"
#include "passes/passes.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

constexpr int64_t kMinElements = 4096;
constexpr int64_t kPackedColumns = 16;  // an int8 GEMV's columns per block (one 512-bit vector of floats)

// A weight worth a second format, all of whose values it can hold (a weight
// with an infinity or a NaN stays f32: no scale keeps it).
bool worth_converting(const Graph& g, ValueId w) {
  const Node& n = g.node(w);
  if (!is_weight_matrix(g, w) || n.type.dtype != DType::f32 || numel_const(n.type.shape).value_or(0) < kMinElements) return false;
  const float* x = static_cast<const float*>(n.const_data()->raw());
  return std::all_of(x, x + n.const_data()->size(), [](float v) { return std::isfinite(v); });
}

struct Quantized {
  ConstData q;                // Wb or Wq
  std::vector<double> scale;  // i8: per column
};

Quantized quantize(const Node& w, DType to) {
  const int64_t K = w.type.shape[0].value(), N = w.type.shape[1].value();
  const float* src = static_cast<const float*>(w.const_data()->raw());
  NDArray out(to, {K, N});
  Quantized r;
  if (to == DType::bf16) {
    for (int64_t i = 0; i < K * N; ++i) out.set(i, static_cast<double>(src[i]));  // rounded to nearest even
  } else {
    r.scale.assign(static_cast<size_t>(N), 0.0);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) r.scale[static_cast<size_t>(n)] = std::max(r.scale[static_cast<size_t>(n)], std::fabs(static_cast<double>(src[k * N + n])));
    // The scale as the f32 it is stored in; a column of zeros, or of values
    // so small that their scale is no normal f32 (the quotients would be
    // 0/0), gets 1: its values round to 0, off by less than 2^-126 * 127.
    for (double& s : r.scale) {
      const float f = static_cast<float>(s / 127.0);
      s = std::isnormal(f) ? static_cast<double>(f) : 1.0;
    }
    auto* q = static_cast<int8_t*>(out.raw());
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) {
        // Nearest, ties to even; the clamp catches a quotient that the
        // scale's rounding to f32 took just past 127.
        double v = std::nearbyint(static_cast<double>(src[k * N + n]) / r.scale[static_cast<size_t>(n)]);
        q[k * N + n] = static_cast<int8_t>(std::clamp(v, -127.0, 127.0));
      }
  }
  r.q = ConstValues::adopt(std::move(out));
  return r;
}

// Wq [K, N] as Wp [N/16, K, 16].
ConstData packed(const ConstData& q, int64_t K, int64_t N) {
  NDArray out(DType::i8, {N / kPackedColumns, K, kPackedColumns});
  const auto* src = static_cast<const int8_t*>(q->raw());
  auto* dst = static_cast<int8_t*>(out.raw());
  for (int64_t b = 0; b < N / kPackedColumns; ++b)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t l = 0; l < kPackedColumns; ++l) *dst++ = src[k * N + b * kPackedColumns + l];
  return ConstValues::adopt(std::move(out));
}

// Whether every product that reads weight w is one row (no batch): a GEMV.
bool only_one_row_products(const Graph& g, ValueId w) {
  for (const Node& n : g.nodes()) {
    if (n.op != Op::matmul || n.inputs[1] != w) continue;
    const Shape& s = n.type.shape;
    for (size_t d = 0; d + 1 < s.size(); ++d)
      if (s[d] != Dim(1)) return false;
  }
  return true;
}

}  // namespace

bool quantize_weights(Graph& g, const PassOptions& o) {
  if (o.weights == DType::f32) return false;
  if (o.weights != DType::bf16 && o.weights != DType::i8)
    throw Error("quantize_weights: weights as " + std::string(dtype_name(o.weights)) + " (f32, bf16 or i8)");
  bool any = false;
  for (const Node& n : g.nodes()) any |= n.op == Op::matmul && n.type.dtype == DType::f32 && worth_converting(g, n.inputs[1]);
  if (!any) return false;

  Rewriter rw(g);
  Graph& out = rw.out();
  std::vector<ValueId> converted(g.size(), -1);  // per weight: its cast, shared by its products
  std::vector<ValueId> scale(g.size(), -1);
  g = rw.run([&](ValueId v) -> ValueId {
    const Node& n = g.node(v);
    if (n.op != Op::matmul || n.type.dtype != DType::f32 || !worth_converting(g, n.inputs[1])) return Rewriter::kCopy;
    const ValueId w = n.inputs[1];
    if (converted[static_cast<size_t>(w)] < 0) {
      Quantized q = quantize(g.node(w), o.weights);
      const Shape& ws = g.type(w).shape;
      const int64_t K = ws[0].value(), N = ws[1].value();
      ValueId c;
      if (o.weights == DType::i8 && N % kPackedColumns == 0 && N >= 2 * kPackedColumns && only_one_row_products(g, w)) {
        c = out.add_const({DType::i8, {N / kPackedColumns, K, kPackedColumns}}, packed(q.q, K, N));
        c = out.add(Op::reshape, {out.add(Op::permute, {c}, {{"perm", std::vector<int64_t>{1, 0, 2}}})}, {{"shape", ws}});
      } else {
        c = out.add_const({o.weights, ws}, std::move(q.q));
      }
      converted[static_cast<size_t>(w)] = out.add(Op::cast, {c}, {{"to", DType::f32}});
      if (o.weights == DType::i8) scale[static_cast<size_t>(w)] = out.add_const({DType::f32, {g.type(w).shape[1]}}, q.scale);
    }
    ValueId mm = out.add(Op::matmul, {rw.map(n.inputs[0]), converted[static_cast<size_t>(w)]});
    return o.weights == DType::i8 ? out.add(Op::mul, {mm, scale[static_cast<size_t>(w)]}) : mm;
  });
  return true;
}

}  // namespace tj
