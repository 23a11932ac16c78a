// The interpreter's convolution (ir/ops/conv.cpp): per batch element and
// group, the input's windows as columns [C/groups * taps, P] (zeros in the
// padding), contracted with the group's weights [M/groups, C/groups * taps]
// in the order the window form's matmul sums them (input channel, then
// kernel offset, row-major), then the bias. The compute type T rounds every
// step, as the matmul's kernel does.
#include <algorithm>
#include <string_view>

#include "reference/array_ops.h"
#include "tensorjit/error.h"

namespace tj {

using namespace array_ops;

namespace {

// [N, S.., C] <-> [N, C, S..] with the spatial dims flattened: `a` is
// [N, A, B] and the result [N, B, A].
template <class T>
Array<T> swap_inner(const Array<T>& a, Idx shape) {
  const int64_t N = a.shape[0], A = a.shape[1], B = count(Idx(a.shape.begin() + 2, a.shape.end()));
  std::vector<T> o(static_cast<size_t>(N * A * B));
  for (int64_t b = 0; b < N; ++b)
    for (int64_t i = 0; i < A; ++i)
      for (int64_t j = 0; j < B; ++j) o[static_cast<size_t>((b * B + j) * A + i)] = a.ptr()[(b * A + i) * B + j];
  return make(std::move(shape), std::move(o));
}

}  // namespace

template <class T>
Array<T> conv_kernel(const Node& n, const std::vector<const Value<T>*>& in) {
  if (n.attr_bool("channels_last")) {
    // The channels-first convolution of the input permuted, permuted back.
    const Array<T>& xl = in[0]->template as<T>();
    Idx first{xl.shape[0], xl.shape.back()};
    first.insert(first.end(), xl.shape.begin() + 1, xl.shape.end() - 1);
    Idx flat{xl.shape[0], count(Idx(xl.shape.begin() + 1, xl.shape.end() - 1)), xl.shape.back()};
    const Value<T> xf{swap_inner(make(flat, std::vector<T>(xl.ptr(), xl.ptr() + count(xl.shape))), first)};
    Node cf = n;
    for (size_t i = 0; i < cf.def().attrs.size(); ++i)
      if (std::string_view(cf.def().attrs[i].name) == "channels_last") cf.attrs[i] = false;
    std::vector<const Value<T>*> ops = in;
    ops[0] = &xf;
    const Array<T> y = conv_kernel<T>(cf, ops);
    Idx last{y.shape[0]};
    last.insert(last.end(), y.shape.begin() + 2, y.shape.end());
    last.push_back(y.shape[1]);
    return swap_inner(make(Idx{y.shape[0], y.shape[1], count(Idx(y.shape.begin() + 2, y.shape.end()))}, std::vector<T>(y.ptr(), y.ptr() + count(y.shape))),
                      last);
  }
  const Array<T>& x = in[0]->template as<T>();
  const Array<T>& w = in[1]->template as<T>();
  const Array<T>* bias = in.size() > 2 ? &in[2]->template as<T>() : nullptr;
  const auto& stride = n.attr_ints("stride");
  const auto& dilation = n.attr_ints("dilation");
  const auto& pb = n.attr_ints("pad_begin");
  const size_t k = w.shape.size() - 2;
  const int64_t N = x.shape[0], C = x.shape[1], M = w.shape[0], G = n.attr_int("groups");
  const int64_t Cg = C / G, Mg = M / G;
  Idx out{N, M}, ins(x.shape.begin() + 2, x.shape.end()), kernel(w.shape.begin() + 2, w.shape.end());
  for (size_t i = 0; i < k; ++i) out.push_back((ins[i] + pb[i] + n.attr_ints("pad_end")[i] - (kernel[i] - 1) * dilation[i] - 1) / stride[i] + 1);
  Idx os(out.begin() + 2, out.end());
  const int64_t taps = count(kernel), P = count(os), S = count(ins), Kc = Cg * taps;
  std::vector<T> y(static_cast<size_t>(count(out)), T(0));
  if (y.empty()) return make(out, std::move(y));
  // Per (tap, output position): the input position it reads, or -1 in the padding.
  const Windows win{ins, kernel, os, stride, pb, dilation};
  Idx src(static_cast<size_t>(taps * P));
  for (int64_t ti = 0; ti < taps; ++ti)
    for (int64_t pi = 0; pi < P; ++pi) src[static_cast<size_t>(ti * P + pi)] = win.source(ti, pi);
  std::vector<T> col(static_cast<size_t>(Kc * P));
  for (int64_t b = 0; b < N; ++b)
    for (int64_t g = 0; g < G; ++g) {
      for (int64_t c = 0; c < Cg; ++c) {
        const T* xc = x.ptr() + (b * C + g * Cg + c) * S;
        for (int64_t ti = 0; ti < taps; ++ti)
          for (int64_t pi = 0; pi < P; ++pi) {
            const int64_t at = src[static_cast<size_t>(ti * P + pi)];
            col[static_cast<size_t>((c * taps + ti) * P + pi)] = at < 0 ? T(0) : xc[at];
          }
      }
      const T* wg = w.ptr() + g * Mg * Kc;
      T* yg = y.data() + (b * M + g * Mg) * P;
      for (int64_t m = 0; m < Mg; ++m) {
        T* ym = yg + m * P;
        for (int64_t kk = 0; kk < Kc; ++kk) {
          const T a = wg[m * Kc + kk];
          const T* ck = col.data() + kk * P;
          for (int64_t pi = 0; pi < P; ++pi) ym[pi] = ym[pi] + a * ck[pi];
        }
        if (bias)
          for (int64_t pi = 0; pi < P; ++pi) ym[pi] = ym[pi] + bias->ptr()[g * Mg + m];
      }
    }
  return make(out, std::move(y));
}

template Array<float> conv_kernel<float>(const Node&, const std::vector<const Value<float>*>&);
template Array<double> conv_kernel<double>(const Node&, const std::vector<const Value<double>*>&);

}  // namespace tj
