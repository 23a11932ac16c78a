// The pools' rows: max_pool(x [N, C, d..]) over k >= 1 spatial dims, the
// IEEE maximum (NaN-propagating, +0 above -0) of each window of `kernel`
// taps with per-dim strides, dilations and begin/end pads (-inf: a pad
// never wins, and a window all padding is -inf); sum_pool, the sum of each
// window's taps added left to right in row-major order, a pad +0 (average
// pooling is a sum_pool divided by its window counts). With channels_last
// the input is [N, d.., C] and the output [N, o.., C]. The frontends build
// pooling as its window form (the padded input's strided slices, folded by
// max or add: the decomposition below); passes/match_pools.cpp finds that
// form and makes it these ops, after differentiation (the rows have no
// derivative rule: the window form's is used). Their kernel is of its own
// kind (KernelKind::pool: codegen/cpp/kernels/pool.cpp), their reference
// kernels src/reference/pool.cpp.
#include <algorithm>
#include <cmath>

#include "ir/decomposer.h"
#include "ir/layout.h"
#include "ir/ops/infer.h"
#include "ir/ops/rows.h"
#include "ir/ops/windows.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

using AK = AttrKind;
using Cat = OpCategory;

constexpr int64_t kMaxTaps = int64_t{1} << 20;

Type infer_pool(InferCtx& c) {
  const std::string op = c.def.name;
  const bool last = c.attr<bool>("channels_last");
  const Type& x = c.in[0];
  const std::string given = x.str(), form = last ? "[N, d.., C] (channels last)" : "[N, C, d..]";
  if (!is_float(x.dtype)) c.fail(op + " of " + std::string(dtype_name(x.dtype)) + ": floating point only");
  // A sum rounded once per tap, as its window form: f32 and f64 (the kernels' compute types).
  if (c.def.op == Op::sum_pool && x.dtype != DType::f32 && x.dtype != DType::f64)
    c.fail(op + " of " + std::string(dtype_name(x.dtype)) + ": f32 and f64 only");
  const auto& kernel = c.attr<std::vector<int64_t>>("kernel");
  const size_t k = kernel.size();
  if (k == 0) c.fail(op + ": the kernel size is required");
  if (static_cast<size_t>(x.rank()) != k + 2) c.fail(op + ": the input " + given + " must be " + form + " for a kernel of " + std::to_string(k) + " dims");
  auto per_dim = [&](const char* name, int64_t fill) {
    auto& v = c.attr<std::vector<int64_t>>(name);
    if (v.empty()) v.assign(k, fill);
    if (v.size() != k) c.fail(op + ": " + std::string(name) + " has " + std::to_string(v.size()) + " values for " + std::to_string(k) + " spatial dims");
    return v;
  };
  const auto stride = per_dim("stride", 1), dilation = per_dim("dilation", 1), pb = per_dim("pad_begin", 0), pe = per_dim("pad_end", 0);
  const size_t first = last ? 1 : 2;
  int64_t taps = 1;
  for (int64_t t : kernel) taps = t < 1 || t > kMaxTaps ? kMaxTaps + 1 : std::min(taps * t, kMaxTaps + 1);
  if (taps > kMaxTaps) c.fail(op + ": a window of more than 2^20 taps (the kernel's sizes multiplied), or a size below 1");
  Shape out = x.shape;
  constexpr int64_t kMax = int64_t{1} << 31;
  for (size_t i = 0; i < k; ++i) {
    const Dim& d = x.shape[first + i];
    if (!d.is_const()) c.fail(op + ": the input " + given + " needs static spatial dims");
    if (kernel[i] < 1 || kernel[i] > kMax) c.fail(op + ": kernel sizes must be in [1, 2^31]");
    if (stride[i] < 1 || dilation[i] < 1 || stride[i] > kMax || dilation[i] > kMax) c.fail(op + ": strides and dilations must be in [1, 2^31]");
    if (pb[i] < 0 || pe[i] < 0 || pb[i] > kMax || pe[i] > kMax) c.fail(op + ": pads must be in [0, 2^31]");
    const int64_t span = (kernel[i] - 1) * dilation[i] + 1, room = d.value() + pb[i] + pe[i] - span;
    if (room < 0)
      c.fail(op + ": spatial dim " + std::to_string(i) + ": the window spans " + std::to_string(span) + ", more than the padded input (" +
             std::to_string(d.value() + pb[i] + pe[i]) + "): the output would be empty");
    out[first + i] = Dim(room / stride[i] + 1);
  }
  return {x.dtype, out};
}

// One comparison (or add) per tap; the cost model sees no attribute lists,
// so counted as one per input value (taps as many as the stride's area), at
// least one per output.
int64_t pool_flops(const CostArgs& a) { return std::max(a.in_elems(0), a.out_elems()); }

// The window form: x padded with -inf (for a sum, +0), one strided slice
// per tap (row-major over the kernel), folded by max (add) in that order,
// left to right.
ValueId pool_windows(Decomposer& d) {
  const Node& n = d.n;
  const bool last = n.attr_bool("channels_last"), sum = n.op == Op::sum_pool;
  const int64_t r = n.type.rank();
  const ValueId x = last ? d.op(Op::permute, {d.in[0]}, {{"perm", channels_first_perm(r)}}) : d.in[0];
  const ValueId padded = windows::pad_spatial(d, x, n.attr_ints("pad_begin"), n.attr_ints("pad_end"), d.c(sum ? 0.0 : -INFINITY));
  const Shape out = last ? windows::permuted(n.type.shape, channels_first_perm(r)) : n.type.shape;
  ValueId y = -1;
  for (ValueId s : windows::slices(d, padded, n.attr_ints("kernel"), n.attr_ints("stride"), n.attr_ints("dilation"), out, n.def().name))
    y = y < 0 ? s : d.op(sum ? Op::add : Op::max, {y, s});
  return last ? d.op(Op::permute, {y}, {{"perm", channels_last_perm(r)}}) : y;
}

}  // namespace

namespace rows {

std::vector<OpDef> pool() {
  const std::vector<int64_t> none;
  const std::vector<AttrSpec> attrs = {{"kernel", AK::Ints, AttrValue(none)},    {"stride", AK::Ints, AttrValue(none)},
                                       {"dilation", AK::Ints, AttrValue(none)},  {"pad_begin", AK::Ints, AttrValue(none)},
                                       {"pad_end", AK::Ints, AttrValue(none)},   {"channels_last", AK::Bool, AttrValue(false)}};
  return {
      {.op = Op::max_pool, .name = "max_pool", .category = Cat::reduction, .min_inputs = 1, .max_inputs = 1,
       .attrs = attrs,
       .infer = infer_pool, .fuse = Fuse::conv, .flops_fn = pool_flops, .decompose = pool_windows},
      {.op = Op::sum_pool, .name = "sum_pool", .category = Cat::reduction, .min_inputs = 1, .max_inputs = 1,
       .attrs = attrs,
       .infer = infer_pool, .fuse = Fuse::conv, .flops_fn = pool_flops, .decompose = pool_windows},
  };
}

}  // namespace rows

}  // namespace tj
