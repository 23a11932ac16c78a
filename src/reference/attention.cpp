// The interpreter's kernels for flash_attn and its backward (attn_lse,
// attn_dq, attn_dkv; ir/ops/attention_grad.cpp): every score recomputed in
// double from q and k, for clarity rather than speed.
#include <algorithm>
#include <cmath>
#include <limits>

#include "reference/array_ops.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

using namespace array_ops;

// The scores of flash_attn and of its backward (ir/ops/attention_grad.cpp):
// s_ij = scale q_i.k_j + bias_ij over the keys query i sees, computed in
// double. Query head h reads KV head h / group.
template <class T>
struct Scores {
  const Array<T>& q;
  const Array<T>& k;
  const Array<T>* bias = nullptr;
  bool causal;
  int64_t offset = 0;
  double scale;
  int64_t B, H, T_, D, Hkv, S, group;
  int64_t bs[4] = {0, 0, 0, 0};  // the bias' strides over (batch, head, query, key): 0 where it broadcasts

  // `extra`: where the optional operands (offset, bias) start.
  Scores(const Node& n, const std::vector<const Value<T>*>& in, size_t extra)
      : q(in[0]->template as<T>()), k(in[1]->template as<T>()), causal(n.attr_bool("causal")), scale(n.attr_float("scale")) {
    if (causal) offset = scalar_int(*in[extra]);
    if (n.attr_bool("bias")) bias = &in.back()->template as<T>();
    B = q.shape[0], H = q.shape[1], T_ = q.shape[2], D = q.shape[3], Hkv = k.shape[1], S = k.shape[2];
    group = Hkv ? H / Hkv : 1;
    if (bias)
      for (int d = 3, step = 1; d >= 0; step *= static_cast<int>(bias->shape[static_cast<size_t>(d)]), --d)
        bs[d] = bias->shape[static_cast<size_t>(d)] == 1 ? 0 : step;
  }
  // Keys j < limit(i) are visible: j <= offset + i (clamped: no overflow for any offset).
  int64_t limit(int64_t i) const { return !causal ? S : offset >= S ? S : offset + i + 1 < 0 ? 0 : std::min<int64_t>(S, offset + i + 1); }
  const T* q_row(int64_t b, int64_t h, int64_t i) const { return q.ptr() + ((b * H + h) * T_ + i) * D; }
  double operator()(int64_t b, int64_t h, int64_t i, int64_t j) const {
    const T* Q = q_row(b, h, i);
    const T* K = k.ptr() + ((b * Hkv + h / group) * S + j) * D;
    double dot = 0;
    for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(Q[d]) * K[d];
    return dot * scale + (bias ? static_cast<double>(bias->ptr()[b * bs[0] + h * bs[1] + i * bs[2] + j * bs[3]]) : 0.0);
  }
  // log sum_j exp(s_ij) over the visible keys: -inf for none.
  double lse(int64_t b, int64_t h, int64_t i) const {
    double m = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t j = 0; j < limit(i); ++j) m = std::max(m, (*this)(b, h, i, j));
    if (m == -std::numeric_limits<double>::infinity()) return m;
    for (int64_t j = 0; j < limit(i); ++j) sum += std::exp((*this)(b, h, i, j) - m);
    return m + std::log(sum);
  }
};

template <class T>
Array<T> flash_attn(const Node& n, const std::vector<const Value<T>*>& in) {
  Scores<T> sc(n, in, 3);
  const Array<T>& v = in[2]->template as<T>();
  bool zero_empty = n.attr_bool("zero_empty_rows");
  const int64_t B = sc.B, Hq = sc.H, T_ = sc.T_, S = sc.S, Dv = v.shape[3];
  std::vector<T> out(static_cast<size_t>(B * Hq * T_ * Dv));
  std::vector<double> s(static_cast<size_t>(S));
  std::vector<double> acc(static_cast<size_t>(Dv));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      const T* V = v.ptr() + (b * sc.Hkv + h / sc.group) * S * Dv;
      for (int64_t i = 0; i < T_; ++i) {
        int64_t limit = sc.limit(i);
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < limit; ++j) m = std::max(m, s[static_cast<size_t>(j)] = sc(b, h, i, j));
        double sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < limit; ++j) {
          double p = std::exp(s[static_cast<size_t>(j)] - m);
          sum += p;
          for (int64_t d = 0; d < Dv; ++d) acc[static_cast<size_t>(d)] += p * V[j * Dv + d];
        }
        T* O = out.data() + ((b * Hq + h) * T_ + i) * Dv;
        // A row with every key masked (none visible, or every score -inf)
        // has no defined softmax: NaN, as softmax gives, or 0 where asked
        // (zero_empty_rows: as softmax followed by where(isnan(p), 0, p)).
        bool empty = !(sum > 0);
        double fill = zero_empty ? 0.0 : std::numeric_limits<double>::quiet_NaN();
        for (int64_t d = 0; d < Dv; ++d) O[d] = static_cast<T>(empty ? fill : acc[static_cast<size_t>(d)] / sum);
      }
    }
  }
  return make(Idx{B, Hq, T_, Dv}, std::move(out));
}

template <class T>
Array<T> attn_lse(const Node& n, const std::vector<const Value<T>*>& in) {
  Scores<T> sc(n, in, 2);
  std::vector<T> out(static_cast<size_t>(sc.B * sc.H * sc.T_));
  for (int64_t b = 0; b < sc.B; ++b)
    for (int64_t h = 0; h < sc.H; ++h)
      for (int64_t i = 0; i < sc.T_; ++i) out[static_cast<size_t>((b * sc.H + h) * sc.T_ + i)] = static_cast<T>(sc.lse(b, h, i));
  return make(Idx{sc.B, sc.H, sc.T_}, std::move(out));
}

// attn_dq and attn_dkv: each visible pair's p_ij and ds_ij = p_ij (dout_i.v_j - delta_i)
// added into dq_i (scale ds k_j), or into dk_j (scale ds q_i) and dv_j (p dout_i).
template <class T>
Array<T> attn_grad(const Node& n, const std::vector<const Value<T>*>& in) {
  Scores<T> sc(n, in, 6);
  const Array<T>& v = in[2]->template as<T>();
  const Array<T>& dout = in[3]->template as<T>();
  const Array<T>& lse = in[4]->template as<T>();
  const Array<T>& delta = in[5]->template as<T>();
  const bool zero_empty = n.attr_bool("zero_empty_rows"), dq = n.op == Op::attn_dq;
  const int64_t B = sc.B, H = sc.H, T_ = sc.T_, D = sc.D, S = sc.S, Hkv = sc.Hkv, Dv = v.shape[3];
  const int64_t width = dq ? D : D + Dv;
  std::vector<double> acc(static_cast<size_t>((dq ? B * H * T_ : B * Hkv * S) * width), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / sc.group;
      for (int64_t i = 0; i < T_; ++i) {
        const int64_t row = (b * H + h) * T_ + i;
        const double l = static_cast<double>(lse.ptr()[row]), dl = static_cast<double>(delta.ptr()[row]);
        const T* Q = sc.q_row(b, h, i);
        const T* dO = dout.ptr() + row * Dv;
        for (int64_t j = 0; j < sc.limit(i); ++j) {
          double p = l == -std::numeric_limits<double>::infinity() ? (zero_empty ? 0.0 : std::numeric_limits<double>::quiet_NaN())
                                                                  : std::exp(sc(b, h, i, j) - l);
          const T* V = v.ptr() + ((b * Hkv + g) * S + j) * Dv;
          double dp = 0;
          for (int64_t d = 0; d < Dv; ++d) dp += static_cast<double>(dO[d]) * V[d];
          double ds = p * (dp - dl);
          if (dq) {
            const T* K = sc.k.ptr() + ((b * Hkv + g) * S + j) * D;
            for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(row * D + d)] += sc.scale * ds * K[d];
          } else {
            double* out = acc.data() + ((b * Hkv + g) * S + j) * width;
            for (int64_t d = 0; d < D; ++d) out[d] += sc.scale * ds * Q[d];
            for (int64_t d = 0; d < Dv; ++d) out[D + d] += p * dO[d];
          }
        }
      }
    }
  std::vector<T> out(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) out[i] = static_cast<T>(acc[i]);
  return make(dq ? Idx{B, H, T_, D} : Idx{B, Hkv, S, width}, std::move(out));
}

}  // namespace

template <class T>
Array<T> attention_kernel(const Node& n, const std::vector<const Value<T>*>& in) {
  switch (n.op) {
    case Op::flash_attn: return flash_attn(n, in);
    case Op::attn_lse: return attn_lse(n, in);
    case Op::attn_dq:
    case Op::attn_dkv: return attn_grad(n, in);
    default: throw Error(std::string("not an attention op: ") + n.def().name);
  }
}

template Array<float> attention_kernel<float>(const Node&, const std::vector<const Value<float>*>&);
template Array<double> attention_kernel<double>(const Node&, const std::vector<const Value<double>*>&);

}  // namespace tj
