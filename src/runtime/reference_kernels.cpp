#include "runtime/reference_kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "tensorjit/error.h"
#include "tensorjit/ndarray.h"

namespace tj {

namespace {

using Idx = std::vector<int64_t>;

int64_t count(const Idx& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Idx row_major_strides(const Idx& s) {
  Idx st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

// Strides that read `in` broadcast to `out` (numpy rules, aligned right).
Idx broadcast_strides(const Idx& in, const Idx& out) {
  Idx st(out.size(), 0);
  Idx ist = row_major_strides(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[off + i] = in[i] == 1 ? 0 : ist[i];
  return st;
}

template <class T>
Array<T> make(Idx shape, std::vector<T> data) {
  return Array<T>{std::move(shape), std::make_shared<const std::vector<T>>(std::move(data))};
}

// Calls f(out_index, offsets) for each output row: `offsets[k]` is where input
// k's row starts; the row itself runs along the last dim with strides st[k].
template <size_t N, class F>
void for_each_row(const Idx& out, const std::array<Idx, N>& st, F f) {
  size_t r = out.size();
  if (r == 0) {
    std::array<int64_t, N> off{};
    f(int64_t{0}, off, int64_t{1});
    return;
  }
  int64_t inner = out[r - 1];
  int64_t rows = count(out) / std::max<int64_t>(inner, 1);
  if (inner == 0) return;
  Idx idx(r - 1, 0);
  for (int64_t row = 0; row < rows; ++row) {
    std::array<int64_t, N> off{};
    for (size_t k = 0; k < N; ++k)
      for (size_t d = 0; d + 1 < r; ++d) off[k] += idx[d] * st[k][d];
    f(row * inner, off, inner);
    for (size_t d = r - 1; d-- > 0;) {
      if (++idx[d] < out[d]) break;
      idx[d] = 0;
    }
  }
}

template <class T, class F, size_t... I>
Array<T> map_impl(const Idx& out, const std::array<const Array<T>*, sizeof...(I)>& in, F f, std::index_sequence<I...>) {
  constexpr size_t N = sizeof...(I);
  std::vector<T> r(static_cast<size_t>(count(out)));
  bool same = ((in[I]->shape == out) && ...);
  if (same) {
    std::array<const T*, N> p{in[I]->ptr()...};
    for (size_t i = 0; i < r.size(); ++i) r[i] = f(p[I][i]...);
  } else {
    std::array<Idx, N> st{broadcast_strides(in[I]->shape, out)...};
    std::array<const T*, N> p{in[I]->ptr()...};
    size_t last = out.empty() ? 0 : out.size() - 1;
    for_each_row<N>(out, st, [&](int64_t o, const std::array<int64_t, N>& off, int64_t inner) {
      std::array<int64_t, N> s{};
      if (!out.empty()) s = {st[I][last]...};
      for (int64_t j = 0; j < inner; ++j) r[static_cast<size_t>(o + j)] = f(p[I][off[I] + j * s[I]]...);
    });
  }
  return make(out, std::move(r));
}

template <size_t N, class T, class F>
Array<T> map(const Idx& out, const std::vector<const Array<T>*>& in, F f) {
  std::array<const Array<T>*, N> a;
  for (size_t i = 0; i < N; ++i) a[i] = in[i];
  return map_impl<T>(out, a, f, std::make_index_sequence<N>{});
}

// Copies `src` read through (offset, strides) into a dense array of `out`.
template <class T>
Array<T> copy_strided(const Array<T>& src, int64_t offset, const Idx& strides, const Idx& out) {
  std::vector<T> r(static_cast<size_t>(count(out)));
  const T* p = src.ptr() + offset;
  size_t last = out.empty() ? 0 : out.size() - 1;
  int64_t s = out.empty() ? 0 : strides[last];
  for_each_row<1>(out, {strides}, [&](int64_t o, const std::array<int64_t, 1>& off, int64_t inner) {
    for (int64_t j = 0; j < inner; ++j) r[static_cast<size_t>(o + j)] = p[off[0] + j * s];
  });
  return make(out, std::move(r));
}

template <class T>
Array<T> reshaped(const Array<T>& a, Idx shape) {
  return Array<T>{std::move(shape), a.data};
}

template <class T>
Array<T> reduce(const Node& n, const Array<T>& x, const Idx& out) {
  const auto& axes = n.attr_ints("axes");
  Idx kept = x.shape;
  for (int64_t a : axes) kept[static_cast<size_t>(a)] = 1;
  Idx ost = row_major_strides(kept);
  for (int64_t a : axes) ost[static_cast<size_t>(a)] = 0;
  int64_t m = count(kept);
  double init = n.op == Op::amax ? -std::numeric_limits<double>::infinity() : 0.0;
  std::vector<double> acc(static_cast<size_t>(m), init);
  const T* p = x.ptr();
  size_t last = x.shape.empty() ? 0 : x.shape.size() - 1;
  int64_t os = x.shape.empty() ? 0 : ost[last];
  for_each_row<1>(x.shape, {ost}, [&](int64_t i, const std::array<int64_t, 1>& off, int64_t inner) {
    if (n.op == Op::amax) {
      for (int64_t j = 0; j < inner; ++j) {
        double v = p[i + j];
        double& a = acc[static_cast<size_t>(off[0] + j * os)];
        if (v > a || std::isnan(v)) a = std::isnan(a) ? a : v;
      }
    } else {
      for (int64_t j = 0; j < inner; ++j) acc[static_cast<size_t>(off[0] + j * os)] += p[i + j];
    }
  });
  double div = n.op == Op::mean ? static_cast<double>(count(x.shape) / std::max<int64_t>(m, 1)) : 1.0;
  std::vector<T> r(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) r[i] = static_cast<T>(acc[i] / div);
  return make(out, std::move(r));
}

template <class T>
Array<T> matmul(const Array<T>& a, const Array<T>& b, const Idx& out) {
  size_t r = out.size();
  int64_t M = out[r - 2], N = out[r - 1], K = a.shape[a.shape.size() - 1];
  Idx batch(out.begin(), out.end() - 2);
  Idx ab(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  Idx ast = broadcast_strides(ab, batch), bst = broadcast_strides(bb, batch);
  std::vector<T> c(static_cast<size_t>(count(out)), T(0));
  int64_t nb = count(batch);
  Idx idx(batch.size(), 0);
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t ao = 0, bo = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      ao += idx[d] * ast[d];
      bo += idx[d] * bst[d];
    }
    const T* A = a.ptr() + ao * M * K;
    const T* B = b.ptr() + bo * K * N;
    T* C = c.data() + bi * M * N;
    constexpr int64_t kb = 256;
    for (int64_t k0 = 0; k0 < K; k0 += kb) {
      int64_t k1 = std::min(K, k0 + kb);
      for (int64_t i = 0; i < M; ++i) {
        T* ci = C + i * N;
        for (int64_t k = k0; k < k1; ++k) {
          T aik = A[i * K + k];
          const T* bk = B + k * N;
          for (int64_t j = 0; j < N; ++j) ci[j] += aik * bk[j];
        }
      }
    }
    for (size_t d = batch.size(); d-- > 0;) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
  return make(out, std::move(c));
}

// Splits a shape around `axis` into (outer, length, inner).
std::array<int64_t, 3> around(const Idx& s, int64_t axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= s[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis) + 1; i < s.size(); ++i) inner *= s[i];
  return {outer, s[static_cast<size_t>(axis)], inner};
}

template <class T>
Array<T> softmax(const Array<T>& x, int64_t axis) {
  auto [outer, L, inner] = around(x.shape, axis);
  std::vector<T> r(static_cast<size_t>(x.numel()));
  const T* p = x.ptr();
  std::vector<double> e(static_cast<size_t>(L));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      int64_t base = o * L * inner + in;
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t l = 0; l < L; ++l) m = std::max(m, static_cast<double>(p[base + l * inner]));
      double s = 0;
      for (int64_t l = 0; l < L; ++l) s += e[static_cast<size_t>(l)] = std::exp(static_cast<double>(p[base + l * inner]) - m);
      for (int64_t l = 0; l < L; ++l) r[static_cast<size_t>(base + l * inner)] = static_cast<T>(e[static_cast<size_t>(l)] / s);
    }
  }
  return make(x.shape, std::move(r));
}

template <class T>
Array<T> norm(const Node& n, const std::vector<const Array<T>*>& in) {
  const Array<T>& x = *in[0];
  int64_t D = x.shape.back();
  int64_t rows = D ? x.numel() / D : 0;
  double eps = n.attr_float("eps");
  const T* p = x.ptr();
  const T* w = in[1]->ptr();
  const T* b = n.op == Op::layer_norm ? in[2]->ptr() : nullptr;
  std::vector<T> r(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < rows; ++i) {
    const T* xi = p + i * D;
    T* ri = r.data() + i * D;
    if (n.op == Op::rms_norm) {
      double ss = 0;
      for (int64_t j = 0; j < D; ++j) ss += static_cast<double>(xi[j]) * xi[j];
      double inv = 1.0 / std::sqrt(ss / static_cast<double>(D) + eps);
      for (int64_t j = 0; j < D; ++j) ri[j] = static_cast<T>(xi[j] * inv * w[j]);
    } else {
      double mu = 0;
      for (int64_t j = 0; j < D; ++j) mu += xi[j];
      mu /= static_cast<double>(D);
      double var = 0;
      for (int64_t j = 0; j < D; ++j) var += (xi[j] - mu) * (xi[j] - mu);
      double inv = 1.0 / std::sqrt(var / static_cast<double>(D) + eps);
      for (int64_t j = 0; j < D; ++j) ri[j] = static_cast<T>((xi[j] - mu) * inv * w[j] + b[j]);
    }
  }
  return make(x.shape, std::move(r));
}

int64_t scalar_int(const Array<double>& a) { return static_cast<int64_t>(a.ptr()[0]); }
int64_t scalar_int(const Array<float>& a) { return static_cast<int64_t>(a.ptr()[0]); }

template <class T>
Array<T> kv_write(const Node& n, const std::vector<const Array<T>*>& in) {
  const Array<T>& cache = *in[0];
  const Array<T>& rows = *in[1];
  int64_t pos = scalar_int(*in[2]);
  int64_t axis = n.attr_int("axis");
  auto [outer, L, inner] = around(cache.shape, axis);
  int64_t R = rows.shape[static_cast<size_t>(axis)];
  if (pos < 0 || pos + R > L)
    throw Error("kv_write: rows [" + std::to_string(pos) + ", " + std::to_string(pos + R) + ") outside cache length " + std::to_string(L));
  std::vector<T> r(cache.data->begin(), cache.data->end());
  for (int64_t o = 0; o < outer; ++o)
    std::copy_n(rows.ptr() + o * R * inner, R * inner, r.data() + (o * L + pos) * inner);
  return make(cache.shape, std::move(r));
}

template <class T>
Array<T> flash_attn(const Node& n, const std::vector<const Array<T>*>& in) {
  const Array<T>& q = *in[0];
  const Array<T>& k = *in[1];
  const Array<T>& v = *in[2];
  bool causal = n.attr_bool("causal");
  int64_t offset = causal ? scalar_int(*in[3]) : 0;
  double scale = n.attr_float("scale");
  int64_t B = q.shape[0], Hq = q.shape[1], T_ = q.shape[2], D = q.shape[3];
  int64_t Hkv = k.shape[1], S = k.shape[2], Dv = v.shape[3];
  int64_t group = Hq / Hkv;
  std::vector<T> out(static_cast<size_t>(B * Hq * T_ * Dv));
  std::vector<double> s(static_cast<size_t>(S));
  std::vector<double> acc(static_cast<size_t>(Dv));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      int64_t g = h / group;
      const T* K = k.ptr() + (b * Hkv + g) * S * D;
      const T* V = v.ptr() + (b * Hkv + g) * S * Dv;
      for (int64_t i = 0; i < T_; ++i) {
        const T* Q = q.ptr() + ((b * Hq + h) * T_ + i) * D;
        int64_t limit = causal ? std::min<int64_t>(S, offset + i + 1) : S;
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < limit; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(Q[d]) * K[j * D + d];
          s[static_cast<size_t>(j)] = dot * scale;
          m = std::max(m, s[static_cast<size_t>(j)]);
        }
        double sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < limit; ++j) {
          double p = std::exp(s[static_cast<size_t>(j)] - m);
          sum += p;
          for (int64_t d = 0; d < Dv; ++d) acc[static_cast<size_t>(d)] += p * V[j * Dv + d];
        }
        T* O = out.data() + ((b * Hq + h) * T_ + i) * Dv;
        // A row with every key masked has no defined softmax: NaN, as softmax gives.
        for (int64_t d = 0; d < Dv; ++d)
          O[d] = static_cast<T>(limit > 0 ? acc[static_cast<size_t>(d)] / sum : std::numeric_limits<double>::quiet_NaN());
      }
    }
  }
  return make(Idx{B, Hq, T_, Dv}, std::move(out));
}

template <class T>
Array<T> concat(const Node& n, const std::vector<const Array<T>*>& in, const Idx& out) {
  int64_t axis = n.attr_int("axis");
  auto [outer, L, inner] = around(out, axis);
  std::vector<T> r(static_cast<size_t>(count(out)));
  int64_t at = 0;
  for (const auto* a : in) {
    int64_t len = a->shape[static_cast<size_t>(axis)] * inner;
    for (int64_t o = 0; o < outer; ++o) std::copy_n(a->ptr() + o * len, len, r.data() + o * L * inner + at);
    at += len;
  }
  return make(out, std::move(r));
}

template <class T>
Array<T> gather(const Node& n, const Array<T>& table, const Array<T>& idx, const Idx& out) {
  int64_t axis = n.attr_int("axis");
  auto [outer, L, inner] = around(table.shape, axis);
  int64_t K = idx.numel();
  std::vector<T> r(static_cast<size_t>(count(out)));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < K; ++k) {
      int64_t i = static_cast<int64_t>(idx.ptr()[k]);
      if (i < -L || i >= L) throw Error("gather: index " + std::to_string(i) + " out of range for length " + std::to_string(L));
      if (i < 0) i += L;
      std::copy_n(table.ptr() + (o * L + i) * inner, inner, r.data() + (o * K + k) * inner);
    }
  }
  return make(out, std::move(r));
}

template <class T>
T ieee_max(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  if (a != b) return a > b ? a : b;
  return std::signbit(a) ? b : a;  // +0 beats -0
}

template <class T>
T gelu_tanh(T x) {
  const double c = std::sqrt(2.0 / M_PI);
  double xd = x;
  return static_cast<T>(0.5 * xd * (1.0 + std::tanh(c * (xd + 0.044715 * xd * xd * xd))));
}

}  // namespace

template <class T>
void round_to_dtype(Array<T>& a, DType dt) {
  if (dt != DType::bf16 && dt != DType::f16) return;
  std::vector<T> r(a.data->begin(), a.data->end());
  for (T& v : r) v = static_cast<T>(dt == DType::bf16 ? round_to_bf16(v) : round_to_f16(v));
  a.data = std::make_shared<const std::vector<T>>(std::move(r));
}

template <class T>
Array<T> eval_node(const Node& n, const std::vector<const Array<T>*>& in, const SymEnv& env) {
  Idx out = eval_shape(n.type.shape, env);
  for (int64_t d : out)
    if (d < 0) throw Error("negative size " + std::to_string(d) + " in " + n.type.str());
  const bool int_result = is_int(n.type.dtype);
  auto m1 = [&](auto f) { return map<1, T>(out, in, f); };
  auto m2 = [&](auto f) { return map<2, T>(out, in, f); };
  Array<T> r;
  switch (n.op) {
    case Op::input:
    case Op::param:
    case Op::while_loop:
    case Op::cond:
    case Op::result:  // the interpreter's driver runs their regions
    case Op::kNumOps: throw Error("not an executable op");
    case Op::constant: {
      const auto& d = *n.const_data();
      std::vector<T> v(static_cast<size_t>(count(out)));
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(d.size() == 1 ? d[0] : d[i]);
      r = make(out, std::move(v));
      break;
    }
    case Op::iota: {
      std::vector<T> v(static_cast<size_t>(out[0]));
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(i);
      r = make(out, std::move(v));
      break;
    }
    case Op::neg: r = m1([](T x) { return -x; }); break;
    case Op::exp: r = m1([](T x) { return std::exp(x); }); break;
    case Op::log: r = m1([](T x) { return std::log(x); }); break;
    case Op::tanh: r = m1([](T x) { return std::tanh(x); }); break;
    case Op::sqrt: r = m1([](T x) { return std::sqrt(x); }); break;
    case Op::rsqrt: r = m1([](T x) { return T(1) / std::sqrt(x); }); break;
    case Op::sin: r = m1([](T x) { return std::sin(x); }); break;
    case Op::cos: r = m1([](T x) { return std::cos(x); }); break;
    case Op::abs: r = m1([](T x) { return std::abs(x); }); break;
    case Op::sigmoid: r = m1([](T x) { return T(1) / (T(1) + std::exp(-x)); }); break;
    case Op::recip: r = m1([](T x) { return T(1) / x; }); break;
    case Op::cast: {
      DType to = n.attr_dtype("to");
      if (to == DType::boolean) r = m1([](T x) { return x != T(0) ? T(1) : T(0); });
      else if (is_int(to)) r = m1([](T x) { return std::trunc(x); });
      else r = m1([](T x) { return x; });
      break;
    }
    case Op::add: r = m2([](T a, T b) { return a + b; }); break;
    case Op::sub: r = m2([](T a, T b) { return a - b; }); break;
    case Op::mul: r = m2([](T a, T b) { return a * b; }); break;
    case Op::div:
      if (int_result) {
        r = m2([](T a, T b) {
          if (b == T(0)) throw Error("integer division by zero");
          return std::trunc(a / b);
        });
      } else {
        r = m2([](T a, T b) { return a / b; });
      }
      break;
    // NaN-propagating like numpy's maximum/minimum, and commutative down to
    // the sign of zero (max(-0, +0) = +0, min = -0), as IEEE 754-2019 maximum.
    case Op::max: r = m2([](T a, T b) { return ieee_max(a, b); }); break;
    case Op::min: r = m2([](T a, T b) { return -ieee_max(-a, -b); }); break;
    case Op::pow: r = m2([](T a, T b) { return std::pow(a, b); }); break;
    case Op::eq: r = m2([](T a, T b) { return T(a == b); }); break;
    case Op::ne: r = m2([](T a, T b) { return T(a != b); }); break;
    case Op::lt: r = m2([](T a, T b) { return T(a < b); }); break;
    case Op::le: r = m2([](T a, T b) { return T(a <= b); }); break;
    case Op::gt: r = m2([](T a, T b) { return T(a > b); }); break;
    case Op::ge: r = m2([](T a, T b) { return T(a >= b); }); break;
    case Op::where: r = map<3, T>(out, in, [](T c, T a, T b) { return c != T(0) ? a : b; }); break;
    case Op::sum:
    case Op::amax:
    case Op::mean: r = reduce(n, *in[0], out); break;
    case Op::matmul: r = matmul(*in[0], *in[1], out); break;
    case Op::reshape:
    case Op::squeeze:
    case Op::unsqueeze: r = reshaped(*in[0], out); break;
    case Op::permute: {
      Idx ist = row_major_strides(in[0]->shape);
      const auto& perm = n.attr_ints("perm");
      Idx st;
      for (int64_t p : perm) st.push_back(ist[static_cast<size_t>(p)]);
      r = copy_strided(*in[0], 0, st, out);
      break;
    }
    case Op::expand: r = copy_strided(*in[0], 0, broadcast_strides(in[0]->shape, out), out); break;
    case Op::slice: {
      size_t axis = static_cast<size_t>(n.attr_int("axis"));
      int64_t start = n.attr_dim("start").eval(env), end = n.attr_dim("end").eval(env);
      if (start < 0 || end < start || end > in[0]->shape[axis])
        throw Error("slice [" + std::to_string(start) + ":" + std::to_string(end) + "] outside dimension " + std::to_string(in[0]->shape[axis]));
      Idx st = row_major_strides(in[0]->shape);
      int64_t offset = start * st[axis];
      st[axis] *= n.attr_int("step");
      r = copy_strided(*in[0], offset, st, out);
      break;
    }
    case Op::concat: r = concat(n, in, out); break;
    case Op::gather: r = gather(n, *in[0], *in[1], out); break;
    case Op::softmax: r = softmax(*in[0], n.attr_int("axis")); break;
    case Op::rms_norm:
    case Op::layer_norm: r = norm(n, in); break;
    case Op::silu: r = m1([](T x) { return x / (T(1) + std::exp(-x)); }); break;
    case Op::gelu: r = m1([](T x) { return gelu_tanh(x); }); break;
    case Op::causal_mask: {
      int64_t off = scalar_int(*in[0]);
      std::vector<T> v(static_cast<size_t>(count(out)));
      for (int64_t i = 0; i < out[0]; ++i)
        for (int64_t j = 0; j < out[1]; ++j)
          v[static_cast<size_t>(i * out[1] + j)] = j <= off + i ? T(0) : -std::numeric_limits<T>::infinity();
      r = make(out, std::move(v));
      break;
    }
    case Op::kv_write: r = kv_write(n, in); break;
    case Op::flash_attn: r = flash_attn(n, in); break;
  }
  round_to_dtype(r, n.type.dtype);
  return r;
}

template Array<float> eval_node<float>(const Node&, const std::vector<const Array<float>*>&, const SymEnv&);
template Array<double> eval_node<double>(const Node&, const std::vector<const Array<double>*>&, const SymEnv&);
template void round_to_dtype<float>(Array<float>&, DType);
template void round_to_dtype<double>(Array<double>&, DType);

}  // namespace tj
