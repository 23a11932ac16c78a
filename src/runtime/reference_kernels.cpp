#include "runtime/reference_kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>
#include <utility>

#include "tensorjit/error.h"
#include "tensorjit/ndarray.h"

namespace tj {

namespace {

using Idx = std::vector<int64_t>;
using I = int64_t;  // the element type of integer and bool values

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

template <class E>
Array<E> make(Idx shape, std::vector<E> data) {
  return Array<E>{std::move(shape), std::make_shared<const std::vector<E>>(std::move(data))};
}

// ---- integer arithmetic: two's complement, wrapping (unsigned arithmetic
// has no overflow); the result is wrapped to its dtype's width afterwards.
I wrap_add(I a, I b) { return static_cast<I>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
I wrap_sub(I a, I b) { return static_cast<I>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
I wrap_mul(I a, I b) { return static_cast<I>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }
I wrap_neg(I a) { return static_cast<I>(0 - static_cast<uint64_t>(a)); }

template <class E>
E add_(E a, E b) {
  if constexpr (std::is_integral_v<E>) return wrap_add(a, b);
  else return a + b;
}
template <class E>
E mul_(E a, E b) {
  if constexpr (std::is_integral_v<E>) return wrap_mul(a, b);
  else return a * b;
}

// A float saturated to int64 (NaN: 0), then to the range of `dt`.
template <class T>
I saturate(T x, DType dt) {
  if (std::isnan(x)) return 0;
  I lo = dt == DType::i32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<I>::min();
  I hi = dt == DType::i32 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<I>::max();
  // 2^63 is exact in float and double; every float below it converts exactly.
  if (x >= static_cast<T>(9223372036854775808.0)) return hi;
  if (x < static_cast<T>(-9223372036854775808.0)) return lo;
  return std::clamp(static_cast<I>(std::trunc(x)), lo, hi);
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
  if (inner == 0) return;
  int64_t rows = count(out) / inner;
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

// out[i] = f(in0[i], in1[i], ...) over the broadcast shape `out`; the inputs
// may have different element types, the result has R.
template <class R, class F, class... E>
Array<R> map(const Idx& out, F f, const Array<E>&... in) {
  constexpr size_t N = sizeof...(E);
  std::vector<R> r(static_cast<size_t>(count(out)));
  auto p = std::make_tuple(in.ptr()...);
  if (((in.shape == out) && ...)) {
    std::apply([&](auto... q) { for (size_t i = 0; i < r.size(); ++i) r[i] = f(q[i]...); }, p);
  } else {
    std::array<Idx, N> st{broadcast_strides(in.shape, out)...};
    size_t last = out.empty() ? 0 : out.size() - 1;
    for_each_row<N>(out, st, [&](int64_t o, const std::array<int64_t, N>& off, int64_t inner) {
      std::array<int64_t, N> s{};
      if (!out.empty())
        for (size_t k = 0; k < N; ++k) s[k] = st[k][last];
      [&]<size_t... K>(std::index_sequence<K...>) {
        for (int64_t j = 0; j < inner; ++j) r[static_cast<size_t>(o + j)] = f(std::get<K>(p)[off[K] + j * s[K]]...);
      }(std::make_index_sequence<N>{});
    });
  }
  return make(out, std::move(r));
}

// Copies `src` read through (offset, strides) into a dense array of `out`.
template <class E>
Array<E> copy_strided(const Array<E>& src, int64_t offset, const Idx& strides, const Idx& out) {
  std::vector<E> r(static_cast<size_t>(count(out)));
  if (r.empty()) return make(out, std::move(r));
  const E* p = src.ptr() + offset;
  size_t last = out.empty() ? 0 : out.size() - 1;
  int64_t s = out.empty() ? 0 : strides[last];
  for_each_row<1>(out, {strides}, [&](int64_t o, const std::array<int64_t, 1>& off, int64_t inner) {
    for (int64_t j = 0; j < inner; ++j) r[static_cast<size_t>(o + j)] = p[off[0] + j * s];
  });
  return make(out, std::move(r));
}

template <class E>
Array<E> reduce(const Node& n, const Array<E>& x, const Idx& out) {
  const auto& axes = n.attr_ints("axes");
  Idx kept = x.shape;
  for (int64_t a : axes) kept[static_cast<size_t>(a)] = 1;
  Idx ost = row_major_strides(kept);
  for (int64_t a : axes) ost[static_cast<size_t>(a)] = 0;
  int64_t m = count(kept);
  // Floats accumulate in double, integers exactly (wrapping).
  using Acc = std::conditional_t<std::is_integral_v<E>, I, double>;
  Acc init = n.op != Op::amax ? Acc(0) : std::is_integral_v<E> ? Acc(std::numeric_limits<I>::min()) : Acc(-INFINITY);
  std::vector<Acc> acc(static_cast<size_t>(m), init);
  const E* p = x.ptr();
  size_t last = x.shape.empty() ? 0 : x.shape.size() - 1;
  int64_t os = x.shape.empty() ? 0 : ost[last];
  for_each_row<1>(x.shape, {ost}, [&](int64_t i, const std::array<int64_t, 1>& off, int64_t inner) {
    for (int64_t j = 0; j < inner; ++j) {
      Acc v = static_cast<Acc>(p[i + j]);
      Acc& a = acc[static_cast<size_t>(off[0] + j * os)];
      if (n.op == Op::amax) {
        if constexpr (std::is_integral_v<E>) a = std::max(a, v);
        else if (v > a || std::isnan(v)) a = std::isnan(a) ? a : v;
      } else {
        a = add_(a, v);
      }
    }
  });
  std::vector<E> r(acc.size());
  if constexpr (std::is_integral_v<E>) {
    for (size_t i = 0; i < acc.size(); ++i) r[i] = acc[i];
  } else {
    double div = n.op == Op::mean ? static_cast<double>(count(x.shape) / std::max<int64_t>(m, 1)) : 1.0;
    for (size_t i = 0; i < acc.size(); ++i) r[i] = static_cast<E>(acc[i] / div);
  }
  return make(out, std::move(r));
}

template <class E>
Array<E> matmul(const Array<E>& a, const Array<E>& b, const Idx& out) {
  size_t r = out.size();
  int64_t M = out[r - 2], N = out[r - 1], K = a.shape[a.shape.size() - 1];
  Idx batch(out.begin(), out.end() - 2);
  Idx ab(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  Idx ast = broadcast_strides(ab, batch), bst = broadcast_strides(bb, batch);
  std::vector<E> c(static_cast<size_t>(count(out)), E(0));
  if (c.empty()) return make(out, std::move(c));
  int64_t nb = count(batch);
  Idx idx(batch.size(), 0);
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t ao = 0, bo = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      ao += idx[d] * ast[d];
      bo += idx[d] * bst[d];
    }
    const E* A = a.ptr() + ao * M * K;
    const E* B = b.ptr() + bo * K * N;
    E* C = c.data() + bi * M * N;
    constexpr int64_t kb = 256;
    for (int64_t k0 = 0; k0 < K; k0 += kb) {
      int64_t k1 = std::min(K, k0 + kb);
      for (int64_t i = 0; i < M; ++i) {
        E* ci = C + i * N;
        for (int64_t k = k0; k < k1; ++k) {
          E aik = A[i * K + k];
          const E* bk = B + k * N;
          for (int64_t j = 0; j < N; ++j) ci[j] = add_(ci[j], mul_(aik, bk[j]));
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
Array<T> norm(const Node& n, const Array<T>& x, const Array<T>& wa, const Array<T>* ba) {
  int64_t D = x.shape.back();
  int64_t rows = D ? x.numel() / D : 0;
  double eps = n.attr_float("eps");
  const T* p = x.ptr();
  const T* w = wa.ptr();
  const T* b = ba ? ba->ptr() : nullptr;
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

template <class T>
int64_t scalar_int(const Value<T>& v) {
  const auto& a = v.template as<I>();
  if (a.numel() < 1) throw Error("an integer scalar operand has no element");
  return a.ptr()[0];
}

template <class E, class T>
Array<E> kv_write(const Node& n, const Array<E>& cache, const Array<E>& rows, const Value<T>& pos_value) {
  int64_t pos = scalar_int(pos_value);
  int64_t axis = n.attr_int("axis");
  auto [outer, L, inner] = around(cache.shape, axis);
  int64_t R = rows.shape[static_cast<size_t>(axis)];
  int64_t end;
  if (pos < 0 || __builtin_add_overflow(pos, R, &end) || end > L)
    throw Error("kv_write: rows [" + std::to_string(pos) + ", " + (pos > L ? std::to_string(pos) + "+" + std::to_string(R) : std::to_string(pos + R)) +
                ") outside cache length " + std::to_string(L));
  std::vector<E> r(cache.data->begin(), cache.data->end());
  for (int64_t o = 0; o < outer; ++o)
    std::copy_n(rows.ptr() + o * R * inner, R * inner, r.data() + (o * L + pos) * inner);
  return make(cache.shape, std::move(r));
}

template <class T>
Array<T> flash_attn(const Node& n, const std::vector<const Value<T>*>& in) {
  const Array<T>& q = in[0]->template as<T>();
  const Array<T>& k = in[1]->template as<T>();
  const Array<T>& v = in[2]->template as<T>();
  bool causal = n.attr_bool("causal");
  int64_t offset = causal ? scalar_int(*in[3]) : 0;
  double scale = n.attr_float("scale");
  int64_t B = q.shape[0], Hq = q.shape[1], T_ = q.shape[2], D = q.shape[3];
  int64_t Hkv = k.shape[1], S = k.shape[2], Dv = v.shape[3];
  int64_t group = Hkv ? Hq / Hkv : 1;
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
        // Keys j <= offset + i are visible (clamped: no overflow for any offset).
        int64_t limit = !causal ? S : offset >= S ? S : offset + i + 1 < 0 ? 0 : std::min<int64_t>(S, offset + i + 1);
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

template <class E, class T>
Array<E> concat(const Node& n, const std::vector<const Value<T>*>& in, const Idx& out) {
  int64_t axis = n.attr_int("axis");
  auto [outer, L, inner] = around(out, axis);
  std::vector<E> r(static_cast<size_t>(count(out)));
  int64_t at = 0;
  for (const auto* v : in) {
    const Array<E>& a = v->template as<E>();
    int64_t len = a.shape[static_cast<size_t>(axis)] * inner;
    if (len > 0)
      for (int64_t o = 0; o < outer; ++o) std::copy_n(a.ptr() + o * len, len, r.data() + o * L * inner + at);
    at += len;
  }
  return make(out, std::move(r));
}

template <class E>
Array<E> gather(const Node& n, const Array<E>& table, const Array<I>& idx, const Idx& out) {
  int64_t axis = n.attr_int("axis");
  auto [outer, L, inner] = around(table.shape, axis);
  int64_t K = idx.numel();
  std::vector<E> r(static_cast<size_t>(count(out)));
  // An index is checked where it is read: an empty result reads none (as
  // compiled code, which has no element to compute).
  if (r.empty()) return make(out, std::move(r));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < K; ++k) {
      int64_t i = idx.ptr()[k];
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

// cast: between floats (rounded after), float to int (saturating, NaN -> 0),
// int to int (wrapping), int to float, anything to bool (x != 0).
template <class T>
Value<T> cast(const Node& n, const Value<T>& x, const Idx& out) {
  DType to = n.attr_dtype("to");
  if (x.is_int()) {
    const Array<I>& a = x.template as<I>();
    if (to == DType::boolean) return {map<I>(out, [](I v) { return I(v != 0); }, a)};
    if (is_int(to)) return {map<I>(out, [to](I v) { return wrap_int(v, to); }, a)};
    return {map<T>(out, [](I v) { return static_cast<T>(v); }, a)};
  }
  const Array<T>& a = x.template as<T>();
  if (to == DType::boolean) return {map<I>(out, [](T v) { return I(v != T(0)); }, a)};
  if (is_int(to)) return {map<I>(out, [to](T v) { return saturate(v, to); }, a)};
  return {map<T>(out, [](T v) { return v; }, a)};
}

template <class T>
Value<T> compare(const Node& n, const std::vector<const Value<T>*>& in, const Idx& out) {
  auto run = [&](const auto& a, const auto& b) -> Array<I> {
    switch (n.op) {
      case Op::eq: return map<I>(out, [](auto x, auto y) { return I(x == y); }, a, b);
      case Op::ne: return map<I>(out, [](auto x, auto y) { return I(x != y); }, a, b);
      case Op::lt: return map<I>(out, [](auto x, auto y) { return I(x < y); }, a, b);
      case Op::le: return map<I>(out, [](auto x, auto y) { return I(x <= y); }, a, b);
      case Op::gt: return map<I>(out, [](auto x, auto y) { return I(x > y); }, a, b);
      default: return map<I>(out, [](auto x, auto y) { return I(x >= y); }, a, b);
    }
  };
  if (in[0]->is_int()) return {run(in[0]->template as<I>(), in[1]->template as<I>())};
  return {run(in[0]->template as<T>(), in[1]->template as<T>())};
}

// The ops whose operands hold the result's element type E (ints: I,
// floats: the compute type T), apart from integer scalars and indices.
template <class E, class T>
Array<E> eval_same(const Node& n, const std::vector<const Value<T>*>& in, const Idx& out, const SymEnv& env) {
  constexpr bool integer = std::is_integral_v<E>;
  auto A = [&](size_t i) -> const Array<E>& { return in[i]->template as<E>(); };
  auto m1 = [&](auto f) { return map<E>(out, f, A(0)); };
  auto m2 = [&](auto f) { return map<E>(out, f, A(0), A(1)); };
  switch (n.op) {
    case Op::constant: {
      const auto& d = *n.const_data();
      std::vector<E> v(static_cast<size_t>(count(out)));
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<E>(d.size() == 1 ? d[0] : d[i]);
      return make(out, std::move(v));
    }
    case Op::iota: {
      std::vector<E> v(static_cast<size_t>(out[0]));
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<E>(i);
      return make(out, std::move(v));
    }
    case Op::neg:
      if constexpr (integer) return m1([](E x) { return wrap_neg(x); });
      else return m1([](E x) { return -x; });
    case Op::abs:
      if constexpr (integer) return m1([](E x) { return x < 0 ? wrap_neg(x) : x; });  // abs(INT_MIN) wraps to INT_MIN
      else return m1([](E x) { return std::abs(x); });
    case Op::add: return m2([](E a, E b) { return add_(a, b); });
    case Op::sub:
      if constexpr (integer) return m2([](E a, E b) { return wrap_sub(a, b); });
      else return m2([](E a, E b) { return a - b; });
    case Op::mul: return m2([](E a, E b) { return mul_(a, b); });
    case Op::div:
      if constexpr (integer) {
        return m2([](E a, E b) {
          if (b == 0) throw Error("integer division by zero");
          return b == -1 ? wrap_neg(a) : a / b;  // INT_MIN / -1 wraps
        });
      } else {
        return m2([](E a, E b) { return a / b; });
      }
    // NaN-propagating like numpy's maximum/minimum, and commutative down to
    // the sign of zero (max(-0, +0) = +0, min = -0), as IEEE 754-2019 maximum.
    case Op::max:
      if constexpr (integer) return m2([](E a, E b) { return std::max(a, b); });
      else return m2([](E a, E b) { return ieee_max(a, b); });
    case Op::min:
      if constexpr (integer) return m2([](E a, E b) { return std::min(a, b); });
      else return m2([](E a, E b) { return -ieee_max(-a, -b); });
    case Op::where: return map<E>(out, [](I c, E a, E b) { return c != 0 ? a : b; }, in[0]->template as<I>(), A(1), A(2));
    case Op::sum:
    case Op::amax:
    case Op::mean: return reduce(n, A(0), out);
    case Op::matmul: return matmul(A(0), A(1), out);
    case Op::reshape:
    case Op::squeeze:
    case Op::unsqueeze: return Array<E>{out, A(0).data};
    case Op::permute: {
      Idx ist = row_major_strides(A(0).shape);
      Idx st;
      for (int64_t p : n.attr_ints("perm")) st.push_back(ist[static_cast<size_t>(p)]);
      return copy_strided(A(0), 0, st, out);
    }
    case Op::expand: return copy_strided(A(0), 0, broadcast_strides(A(0).shape, out), out);
    case Op::slice: {
      size_t axis = static_cast<size_t>(n.attr_int("axis"));
      int64_t start = n.attr_dim("start").eval(env), end = n.attr_dim("end").eval(env);
      if (start < 0 || end < start || end > A(0).shape[axis])
        throw Error("slice [" + std::to_string(start) + ":" + std::to_string(end) + "] outside dimension " + std::to_string(A(0).shape[axis]));
      Idx st = row_major_strides(A(0).shape);
      int64_t offset = start * st[axis];
      st[axis] = out[axis] <= 1 ? 0 : st[axis] * n.attr_int("step");  // one element: the step never applies
      return copy_strided(A(0), offset, st, out);
    }
    case Op::concat: return concat<E>(n, in, out);
    case Op::gather: return gather(n, A(0), in[1]->template as<I>(), out);
    case Op::kv_write: return kv_write(n, A(0), A(1), *in[2]);
    default: break;
  }
  if constexpr (integer) {
    throw Error(std::string(n.def().name) + " of integers");
  } else {
    switch (n.op) {
      case Op::exp: return m1([](E x) { return std::exp(x); });
      case Op::log: return m1([](E x) { return std::log(x); });
      case Op::tanh: return m1([](E x) { return std::tanh(x); });
      case Op::sqrt: return m1([](E x) { return std::sqrt(x); });
      case Op::rsqrt: return m1([](E x) { return E(1) / std::sqrt(x); });
      case Op::sin: return m1([](E x) { return std::sin(x); });
      case Op::cos: return m1([](E x) { return std::cos(x); });
      case Op::sigmoid: return m1([](E x) { return E(1) / (E(1) + std::exp(-x)); });
      case Op::recip: return m1([](E x) { return E(1) / x; });
      case Op::pow: return m2([](E a, E b) { return std::pow(a, b); });
      case Op::softmax: return softmax(A(0), n.attr_int("axis"));
      case Op::rms_norm: return norm<E>(n, A(0), A(1), nullptr);
      case Op::layer_norm: return norm(n, A(0), A(1), &A(2));
      case Op::silu: return m1([](E x) { return x / (E(1) + std::exp(-x)); });
      case Op::gelu: return m1([](E x) { return gelu_tanh(x); });
      case Op::causal_mask: {
        int64_t off = scalar_int(*in[0]);
        std::vector<E> v(static_cast<size_t>(count(out)));
        for (int64_t i = 0; i < out[0]; ++i)
          for (int64_t j = 0; j < out[1]; ++j)  // j <= off + i, without overflow
            v[static_cast<size_t>(i * out[1] + j)] = j - i <= off ? E(0) : -std::numeric_limits<E>::infinity();
        return make(out, std::move(v));
      }
      case Op::flash_attn: return flash_attn(n, in);
      default: throw Error(std::string("not an executable op: ") + n.def().name);
    }
  }
}

}  // namespace

int64_t wrap_int(int64_t v, DType dt) {
  switch (dt) {
    case DType::i32: return static_cast<int32_t>(v);  // modular (C++20)
    case DType::boolean: return v != 0;
    default: return v;
  }
}

void wrap_to_dtype(Array<int64_t>& a, DType dt) {
  if (dt == DType::i64) return;
  bool changes = false;
  for (int64_t v : *a.data) changes |= wrap_int(v, dt) != v;
  if (!changes) return;
  std::vector<int64_t> r(a.data->begin(), a.data->end());
  for (int64_t& v : r) v = wrap_int(v, dt);
  a.data = std::make_shared<const std::vector<int64_t>>(std::move(r));
}

template <class T>
void round_to_dtype(Array<T>& a, DType dt) {
  if (dt != DType::bf16 && dt != DType::f16) return;
  std::vector<T> r(a.data->begin(), a.data->end());
  for (T& v : r) v = static_cast<T>(dt == DType::bf16 ? round_to_bf16(v) : round_to_f16(v));
  a.data = std::make_shared<const std::vector<T>>(std::move(r));
}

template <class T>
Value<T> eval_node(const Node& n, const std::vector<const Value<T>*>& in, const SymEnv& env) {
  Idx out = eval_shape(n.type.shape, env);
  (void)checked_numel(out, n.type.dtype);  // negative or too large: an error, never an overflow
  switch (n.op) {
    case Op::input:
    case Op::param:
    case Op::while_loop:
    case Op::cond:
    case Op::result:  // the interpreter's driver runs their regions
    case Op::kNumOps: throw Error("not an executable op");
    case Op::cast: {
      Value<T> r = cast(n, *in[0], out);
      if (r.is_int()) wrap_to_dtype(std::get<1>(r.a), n.type.dtype);
      else round_to_dtype(std::get<0>(r.a), n.type.dtype);
      return r;
    }
    case Op::eq:
    case Op::ne:
    case Op::lt:
    case Op::le:
    case Op::gt:
    case Op::ge: return compare(n, in, out);
    default: break;
  }
  if (!is_float(n.type.dtype)) {
    Array<I> r = eval_same<I>(n, in, out, env);
    wrap_to_dtype(r, n.type.dtype);
    return {std::move(r)};
  }
  Array<T> r = eval_same<T>(n, in, out, env);
  round_to_dtype(r, n.type.dtype);
  return {std::move(r)};
}

template Value<float> eval_node<float>(const Node&, const std::vector<const Value<float>*>&, const SymEnv&);
template Value<double> eval_node<double>(const Node&, const std::vector<const Value<double>*>&, const SymEnv&);
template void round_to_dtype<float>(Array<float>&, DType);
template void round_to_dtype<double>(Array<double>&, DType);

}  // namespace tj
