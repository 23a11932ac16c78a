#include "reference/kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>
#include <utility>

#include "ir/ops/scalar_math.h"
#include "reference/array_ops.h"
#include "tensorjit/error.h"
#include "tensorjit/ndarray.h"

namespace tj {

namespace {

using namespace array_ops;

// Integers wrap (two's complement); the result is wrapped to its dtype's
// width afterwards (src/ir/ops/scalar_math.h).
template <class E>
E add_(E a, E b) {
  if constexpr (std::is_integral_v<E>) return scalar::wrap_add(a, b);
  else return a + b;
}
template <class E>
E mul_(E a, E b) {
  if constexpr (std::is_integral_v<E>) return scalar::wrap_mul(a, b);
  else return a * b;
}

// A float saturated to the range of `dt` (NaN: 0); u64 as its bits.
template <class T>
I saturate(T x, DType dt) {
  if (std::isnan(x)) return 0;
  if (is_subbyte_int(dt))  // 0 out of range (round_to_dtype)
    return static_cast<I>(round_to_dtype(static_cast<double>(x), dt));
  if (dt == DType::u64) {  // 2^64 is exact in float and double
    if (x >= static_cast<T>(18446744073709551616.0)) return -1;  // UINT64_MAX's bits
    if (x < 1) return 0;
    return static_cast<I>(static_cast<uint64_t>(std::trunc(x)));
  }
  I lo = dt == DType::i64 ? std::numeric_limits<I>::min() : static_cast<I>(int_min(dt));
  I hi = dt == DType::i64 ? std::numeric_limits<I>::max() : static_cast<I>(int_max(dt));
  // 2^63 is exact in float and double; every float below it converts exactly.
  if (x >= static_cast<T>(9223372036854775808.0)) return hi;
  if (x < static_cast<T>(-9223372036854775808.0)) return lo;
  return std::clamp(static_cast<I>(std::trunc(x)), lo, hi);
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
  Acc init = n.op == Op::prod ? Acc(1) : n.op != Op::amax ? Acc(0) : std::is_integral_v<E> ? Acc(std::numeric_limits<I>::min()) : Acc(-INFINITY);
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
      } else if (n.op == Op::prod) {
        a = mul_(a, v);
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

template <class E>
Array<E> scatter_add(const Node& n, const Array<E>& base, const Array<I>& idx, const Array<E>& upd) {
  int64_t axis = n.attr_int("axis");
  auto [outer, L, inner] = around(base.shape, axis);
  int64_t K = idx.numel();
  std::vector<E> r(base.data->begin(), base.data->end());
  if (upd.numel() == 0) return make(base.shape, std::move(r));  // reads no index, as compiled code
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < K; ++k) {
      int64_t i = idx.ptr()[k];
      if (i < -L || i >= L) throw Error("scatter_add: index " + std::to_string(i) + " out of range for length " + std::to_string(L));
      if (i < 0) i += L;
      E* to = r.data() + (o * L + i) * inner;
      const E* from = upd.ptr() + (o * K + k) * inner;
      for (int64_t s = 0; s < inner; ++s) to[s] = add_(to[s], from[s]);
    }
  }
  return make(base.shape, std::move(r));
}

// cast: between floats (rounded after), float to int (saturating, NaN -> 0),
// int to int (wrapping), int to float, anything to bool (x != 0).
template <class T>
Value<T> cast(const Node& n, const Value<T>& x, const Idx& out) {
  DType to = n.attr_dtype("to");
  if (x.is_int()) {
    const Array<I>& a = x.template as<I>();
    if (to == DType::boolean) return {map<I>(out, [](I v) { return I(v != 0); }, a)};
    if (is_int(to)) return {map<I>(out, [to](I v) { return wrap_to(v, to); }, a)};
    return {map<T>(out, [](I v) { return static_cast<T>(v); }, a)};
  }
  const Array<T>& a = x.template as<T>();
  if (to == DType::boolean) return {map<I>(out, [](T v) { return I(v != T(0)); }, a)};
  if (is_int(to)) return {map<I>(out, [to](T v) { return saturate(v, to); }, a)};
  return {map<T>(out, [](T v) { return v; }, a)};
}

// The first index of the maximum along `axis`; NaN is the maximum, the
// first NaN wins (numpy, torch).
template <class E>
Array<I> argmax(const Node& n, const Array<E>& x, const Idx& out) {
  auto [outer, L, inner] = around(x.shape, n.attr_int("axis"));
  std::vector<I> r(static_cast<size_t>(outer * inner));
  if (r.empty()) return make(out, std::move(r));
  if (L == 0) throw Error("argmax over an empty axis");
  const E* p = x.ptr();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const E* row = p + o * L * inner + i;
      I best = 0;
      for (int64_t j = 1; j < L; ++j) {
        E b = row[best * inner], v = row[j * inner];
        if constexpr (!std::is_integral_v<E>) {
          if (std::isnan(b)) break;
          if (std::isnan(v)) {
            best = j;
            break;
          }
        }
        if (v > b) best = j;
      }
      r[static_cast<size_t>(o * inner + i)] = best;
    }
  }
  return make(out, std::move(r));
}

// A pointwise op: its row's scalar function mapped over the operands
// (broadcast). It runs on floats in T when the result or an operand is a
// float (a bool condition joins as 0/1), else on int64.
template <class T>
Value<T> pointwise(const Node& n, const std::vector<const Value<T>*>& in, const Idx& out) {
  const OpDef& def = n.def();
  const std::vector<double> attrs = scalar_attrs(def, n.attrs);
  const double* k = attrs.data();
  bool floats = is_float(n.type.dtype);
  for (const auto* v : in) floats |= !v->is_int();
  auto apply = [&](auto fn, const auto& A) {
    using E = std::remove_cvref_t<decltype(*A(0).ptr())>;
    if (!fn) throw Error(std::string(def.name) + (floats ? " of floats" : " of integers"));
    switch (in.size()) {
      case 1: return map<E>(out, [&](E a) { return fn(a, E(0), E(0), k); }, A(0));
      case 2: return map<E>(out, [&](E a, E b) { return fn(a, b, E(0), k); }, A(0), A(1));
      default: return map<E>(out, [&](E a, E b, E c) { return fn(a, b, c, k); }, A(0), A(1), A(2));
    }
  };
  if (!floats) return {apply(def.scalar.i64, [&](size_t i) -> const Array<I>& { return in[i]->template as<I>(); })};
  std::vector<Array<T>> converted(in.size());
  auto A = [&](size_t i) -> const Array<T>& {
    if (!in[i]->is_int()) return in[i]->template as<T>();
    const Array<I>& a = in[i]->template as<I>();
    std::vector<T> c(a.data->begin(), a.data->end());
    return converted[i] = make(a.shape, std::move(c));
  };
  Array<T> r;
  if constexpr (std::is_same_v<T, float>) r = apply(def.scalar.f32, A);
  else r = apply(def.scalar.f64, A);
  if (is_float(n.type.dtype)) return {std::move(r)};
  std::vector<I> b(r.data->begin(), r.data->end());  // a comparison's 0 or 1
  return {make(out, std::move(b))};
}

// The ops whose operands hold the result's element type E (ints: I,
// floats: the compute type T), apart from integer scalars and indices.
template <class E, class T>
Array<E> eval_same(const Node& n, const std::vector<const Value<T>*>& in, const Idx& out, const SymEnv& env) {
  constexpr bool integer = std::is_integral_v<E>;
  auto A = [&](size_t i) -> const Array<E>& { return in[i]->template as<E>(); };
  switch (n.op) {
    case Op::constant: {
      const auto& d = *n.const_data();
      std::vector<E> v(static_cast<size_t>(count(out)));
      for (size_t i = 0; i < v.size(); ++i) {
        size_t j = d.size() == 1 ? 0 : i;
        if constexpr (integer) v[i] = d.int_at(j);  // exactly: no round trip through double
        else v[i] = static_cast<E>(d[j]);
      }
      return make(out, std::move(v));
    }
    case Op::iota: {
      std::vector<E> v(static_cast<size_t>(out[0]));
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<E>(i);
      return make(out, std::move(v));
    }
    case Op::sum:
    case Op::amax:
    case Op::mean:
    case Op::prod: return reduce(n, A(0), out);
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
    case Op::scatter_add: return scatter_add(n, A(0), in[1]->template as<I>(), A(2));
    case Op::kv_write: return kv_write(n, A(0), A(1), *in[2]);
    default: break;
  }
  if constexpr (integer) {
    throw Error(std::string(n.def().name) + " of integers");
  } else {
    switch (n.op) {
      case Op::softmax: return softmax(A(0), n.attr_int("axis"));
      case Op::rms_norm: return norm<E>(n, A(0), A(1), nullptr);
      case Op::layer_norm: return norm(n, A(0), A(1), &A(2));
      case Op::causal_mask: {
        int64_t off = scalar_int(*in[0]);
        std::vector<E> v(static_cast<size_t>(count(out)));
        for (int64_t i = 0; i < out[0]; ++i)
          for (int64_t j = 0; j < out[1]; ++j)  // j <= off + i, without overflow
            v[static_cast<size_t>(i * out[1] + j)] = j - i <= off ? E(0) : -std::numeric_limits<E>::infinity();
        return make(out, std::move(v));
      }
      case Op::flash_attn:
      case Op::attn_lse:
      case Op::attn_dq:
      case Op::attn_dkv: return attention_kernel(n, in);
      case Op::conv: return conv_kernel(n, in);
      case Op::max_pool:
      case Op::sum_pool: return pool_kernel(n, in);
      default: throw Error(std::string("not an executable op: ") + n.def().name);
    }
  }
}

}  // namespace

void wrap_to_dtype(Array<int64_t>& a, DType dt) {
  if (dt == DType::i64) return;
  bool changes = false;
  for (int64_t v : *a.data) changes |= wrap_to(v, dt) != v;
  if (!changes) return;
  std::vector<int64_t> r(a.data->begin(), a.data->end());
  for (int64_t& v : r) v = wrap_to(v, dt);
  a.data = std::make_shared<const std::vector<int64_t>>(std::move(r));
}

template <class T>
void round_to_dtype(Array<T>& a, DType dt, bool saturate) {
  if (dt != DType::bf16 && dt != DType::f16 && !is_minifloat(dt)) return;
  std::vector<T> r(a.data->begin(), a.data->end());
  for (T& v : r) v = static_cast<T>(round_to_dtype(static_cast<double>(v), dt, saturate));
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
      else round_to_dtype(std::get<0>(r.a), n.type.dtype, n.attr_bool("saturate"));
      return r;
    }
    case Op::argmax: {
      Value<T> r = in[0]->is_int() ? Value<T>{argmax(n, in[0]->template as<I>(), out)} : Value<T>{argmax(n, in[0]->template as<T>(), out)};
      return r;
    }
    default: break;
  }
  if (n.def().fuse == Fuse::pointwise) {  // its row's scalar function
    Value<T> r = pointwise(n, in, out);
    if (r.is_int()) wrap_to_dtype(std::get<1>(r.a), n.type.dtype);
    else round_to_dtype(std::get<0>(r.a), n.type.dtype);
    return r;
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
template void round_to_dtype<float>(Array<float>&, DType, bool);
template void round_to_dtype<double>(Array<double>&, DType, bool);

}  // namespace tj
