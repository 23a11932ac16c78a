// The interpreter's pools (ir/ops/pool.cpp): per output element, the IEEE
// maximum (max_pool) or the sum (sum_pool) of its window's taps in row-major
// order, left to right, a tap in the padding -inf (+0 for a sum), as the
// window form folds its slices.
#include <cmath>
#include <limits>

#include "ir/ops/scalar_math.h"
#include "reference/array_ops.h"
#include "reference/kernels.h"

namespace tj {

using namespace array_ops;

template <class T>
Array<T> pool_kernel(const Node& n, const std::vector<const Value<T>*>& in) {
  const bool sum = n.op == Op::sum_pool;
  const Array<T>& x = in[0]->template as<T>();
  const bool last = n.attr_bool("channels_last");
  const auto& kernel = n.attr_ints("kernel");
  const auto& stride = n.attr_ints("stride");
  const auto& dilation = n.attr_ints("dilation");
  const auto& pb = n.attr_ints("pad_begin");
  const auto& pe = n.attr_ints("pad_end");
  const size_t k = kernel.size(), first = last ? 1 : 2;
  const int64_t N = x.shape[0], C = last ? x.shape.back() : x.shape[1];
  Idx ins(x.shape.begin() + static_cast<int64_t>(first), x.shape.begin() + static_cast<int64_t>(first + k)), os(k);
  for (size_t i = 0; i < k; ++i) os[i] = (ins[i] + pb[i] + pe[i] - (kernel[i] - 1) * dilation[i] - 1) / stride[i] + 1;
  Idx out{N};
  if (!last) out.push_back(C);
  out.insert(out.end(), os.begin(), os.end());
  if (last) out.push_back(C);
  const int64_t P = count(os), S = count(ins), taps = count(kernel);
  std::vector<T> y(static_cast<size_t>(count(out)));
  // Element (b, c, spatial position s) of x, and (b, c, output position p) of y.
  auto xi = [&](int64_t b, int64_t c, int64_t s) { return last ? (b * S + s) * C + c : (b * C + c) * S + s; };
  auto yi = [&](int64_t b, int64_t c, int64_t p) { return last ? (b * P + p) * C + c : (b * C + c) * P + p; };
  const Windows win{ins, kernel, os, stride, pb, dilation};
  Idx src(static_cast<size_t>(taps));  // this output position's window
  for (int64_t pi = 0; pi < P; ++pi) {
    for (int64_t ti = 0; ti < taps; ++ti) src[static_cast<size_t>(ti)] = win.source(ti, pi);
    for (int64_t b = 0; b < N; ++b)
      for (int64_t c = 0; c < C; ++c) {
        T acc = T(0);
        for (int64_t ti = 0; ti < taps; ++ti) {
          const int64_t at = src[static_cast<size_t>(ti)];
          const T v = at >= 0 ? x.ptr()[xi(b, c, at)] : sum ? T(0) : -std::numeric_limits<T>::infinity();
          acc = ti == 0 ? v : sum ? acc + v : scalar::ieee_max(acc, v);
        }
        y[static_cast<size_t>(yi(b, c, pi))] = acc;
      }
  }
  return make(out, std::move(y));
}

template Array<float> pool_kernel<float>(const Node&, const std::vector<const Value<float>*>&);
template Array<double> pool_kernel<double>(const Node&, const std::vector<const Value<double>*>&);

}  // namespace tj
