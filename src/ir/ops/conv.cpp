// The convolution's row: conv(x [N, C, d..], w [M, C/groups, k..], bias [M]?)
// over k >= 1 spatial dims, with per-dim strides, dilations and begin/end
// pads (zeros) and `groups` channel groups. With channels_last the input is
// [N, d.., C] and the output [N, o.., M] (the same values, the channels
// innermost: assign_layouts' choice); the weights are the same. With
// winograd (passes/winograd_weights.cpp) a fourth input u carries the
// weights in the Winograd F(2x2, 3x3) or F(4x4, 3x3) domain (u's second
// dim: 16 or 36 points) for the CPU kernel: the value
// is still that of (x, w, bias), which the reference computes, and u is
// G w G^T of these w: the pass derives it, again for a winograd conv it
// meets (the verifier checks the form and u's shape). Its kernel is a kind of its own
// (schedule/fusion.h: KernelKind::conv; codegen/cpp/kernels/conv.cpp), its
// reference kernel is src/reference/conv.cpp, and its decomposition (for
// targets without a conv kernel, and for differentiation) is the window
// form: one strided slice of the padded input per kernel offset, contracted
// with the weights in one matmul per group.
#include <algorithm>

#include "ir/decomposer.h"
#include "ir/differ.h"
#include "ir/layout.h"
#include "ir/ops/infer.h"
#include "ir/ops/rows.h"
#include "ir/ops/windows.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

using AK = AttrKind;
using Cat = OpCategory;

// Attributes as given, checked: one value per spatial dim.
std::vector<int64_t> per_dim(InferCtx& c, const char* name, size_t k, int64_t fill) {
  auto& v = c.attr<std::vector<int64_t>>(name);
  if (v.empty()) v.assign(k, fill);
  if (v.size() != k) c.fail("conv: " + std::string(name) + " has " + std::to_string(v.size()) + " values for " + std::to_string(k) + " spatial dims");
  return v;
}


Type infer_conv(InferCtx& c) {
  const bool last = c.attr<bool>("channels_last");
  Type xl = c.in[0];
  if (last && xl.rank() >= 3) xl.shape = windows::permuted(xl.shape, channels_first_perm(xl.rank()));
  const Type &x = xl, &w = c.in[1];
  // What the messages show: the input as given, and the layout it must have.
  const std::string given = c.in[0].str(), form = last ? "[N, d.., C] (channels last)" : "[N, C, d..]";
  if (!is_float(x.dtype)) c.fail("conv of " + std::string(dtype_name(x.dtype)) + ": floating point only");
  if (w.dtype != x.dtype) c.fail("conv: weights " + w.str() + " differ in dtype from the input " + given);
  if (w.rank() < 3) c.fail("conv: the weights must be [M, C/groups, k..] with at least one spatial dim, got " + w.str());
  const size_t k = static_cast<size_t>(w.rank() - 2);
  if (static_cast<size_t>(x.rank()) != k + 2) c.fail("conv: the input " + given + " must be " + form + " for the weights " + w.str());
  for (int i = 1; i < x.rank(); ++i)
    if (!x.shape[static_cast<size_t>(i)].is_const()) c.fail("conv: the input " + given + " needs static channels and spatial dims");
  for (const Dim& d : w.shape)
    if (!d.is_const()) c.fail("conv: the weights " + w.str() + " need static dims");
  const int64_t groups = c.attr<int64_t>("groups"), ch = x.shape[1].value(), m = w.shape[0].value();
  if (groups < 1 || ch % groups != 0 || m % groups != 0 || w.shape[1].value() * groups != ch)
    c.fail("conv: input channels " + std::to_string(ch) + " (of " + given + ", " + form + ") and weights " + w.str() + " do not match groups " + std::to_string(groups) +
           " (the groups must divide both channel counts, and the weights hold C/groups input channels)");
  if (c.in.size() > 2) {
    const Type& b = c.in[2];
    if (b.dtype != x.dtype || b.rank() != 1 || b.shape[0] != Dim(m)) c.fail("conv: the bias " + b.str() + " must be " + std::string(dtype_name(x.dtype)) + "[" + std::to_string(m) + "]");
  }
  auto stride = per_dim(c, "stride", k, 1), dilation = per_dim(c, "dilation", k, 1);
  auto pb = per_dim(c, "pad_begin", k, 0), pe = per_dim(c, "pad_end", k, 0);
  Shape out{x.shape[0], Dim(m)};
  constexpr int64_t kMax = int64_t{1} << 31;
  for (size_t i = 0; i < k; ++i) {
    if (stride[i] < 1 || dilation[i] < 1 || stride[i] > kMax || dilation[i] > kMax) c.fail("conv: strides and dilations must be in [1, 2^31]");
    if (pb[i] < 0 || pe[i] < 0 || pb[i] > kMax || pe[i] > kMax) c.fail("conv: pads must be in [0, 2^31]");
    const int64_t kk = w.shape[i + 2].value(), in = x.shape[i + 2].value();
    if (kk < 1) c.fail("conv: kernel sizes must be positive, got " + w.str());
    const int64_t span = (kk - 1) * dilation[i] + 1, room = in + pb[i] + pe[i] - span;
    if (room < 0)
      c.fail("conv: spatial dim " + std::to_string(i) + ": the kernel spans " + std::to_string(span) + " with dilation " + std::to_string(dilation[i]) +
             ", more than the padded input (" + std::to_string(in + pb[i] + pe[i]) + "): the output would be empty");
    out.push_back(Dim(room / stride[i] + 1));
  }
  const bool wino = c.attr<bool>("winograd");
  if (c.in.size() > 3 && !wino) c.fail("conv: a fourth input (the Winograd-domain weights) needs winograd=true");
  if (wino) {
    const bool unit = std::all_of(stride.begin(), stride.end(), [](int64_t s) { return s == 1; }) &&
                      std::all_of(dilation.begin(), dilation.end(), [](int64_t d) { return d == 1; });
    if (!last || k != 2 || groups != 1 || x.dtype != DType::f32 || w.shape[2] != Dim(3) || w.shape[3] != Dim(3) || !unit)
      c.fail("conv: winograd needs a channels-last f32 3x3 conv with one group, stride 1 and dilation 1, got weights " + w.str() + " and input " + given);
    // F(2x2, 3x3): 16 points; F(4x4, 3x3): 36.
    const Shape u2{Dim((m + 63) / 64), Dim(16), Dim(ch), Dim(64)}, u4{Dim((m + 63) / 64), Dim(36), Dim(ch), Dim(64)};
    if (c.in.size() != 4 || c.in[3].dtype != DType::f32 || (c.in[3].shape != u2 && c.in[3].shape != u4))
      c.fail("conv: winograd needs its bias and the weights in the Winograd domain, " + Type{DType::f32, u2}.str() + " (F(2x2, 3x3)) or " +
             Type{DType::f32, u4}.str() + " (F(4x4, 3x3)), as inputs 3 and 4");
  }
  if (last) out = windows::permuted(out, channels_last_perm(static_cast<int64_t>(out.size())));
  return {x.dtype, out};
}

// 2 per multiply-add: every output element sums C/groups * taps products.
int64_t conv_flops(const CostArgs& a) {
  int64_t per = a.in[1].size() > 1 ? 1 : 0;
  for (size_t i = 1; i < a.in[1].size(); ++i) per *= a.in[1][i];
  return 2 * a.out_elems() * per;
}

// The window form (see the file's comment), in the operands' dtype.
ValueId conv_windows(Decomposer& d) {
  Graph& g = d.g;
  const Node& n = d.n;
  const bool last = n.attr_bool("channels_last");
  const int64_t r = n.type.rank();
  // Channels last: the window form of the channels-first input, permuted back.
  const ValueId x = last ? d.op(Op::permute, {d.in[0]}, {{"perm", channels_first_perm(r)}}) : d.in[0], w = d.in[1];
  const Shape xs = g.type(x).shape, ws = g.type(w).shape;
  const size_t k = ws.size() - 2;
  const auto& stride = n.attr_ints("stride");
  const auto& dilation = n.attr_ints("dilation");
  const auto& pb = n.attr_ints("pad_begin");
  const auto& pe = n.attr_ints("pad_end");
  const int64_t groups = n.attr_int("groups"), ch = xs[1].value(), m = ws[0].value();
  // Padded with zeros; one strided slice per kernel offset (row-major over the kernel), each [N, C, 1, out..].
  const ValueId padded = windows::pad_spatial(d, x, pb, pe, d.c(0.0));
  const Shape out = last ? windows::permuted(n.type.shape, channels_first_perm(r)) : n.type.shape;
  std::vector<int64_t> kernel;
  int64_t taps = 1, positions = 1;
  for (size_t i = 0; i < k; ++i) kernel.push_back(ws[i + 2].value()), taps *= ws[i + 2].value(), positions *= out[i + 2].value();
  std::vector<ValueId> cols;
  for (ValueId s : windows::slices(d, padded, kernel, stride, dilation, out, "conv")) cols.push_back(d.op(Op::unsqueeze, {s}, {{"axes", std::vector<int64_t>{2}}}));
  const ValueId all = cols.size() == 1 ? cols[0] : d.op(Op::concat, cols, {{"axis", int64_t{2}}});
  // [N, C, taps, out..] -> [N, groups, C/groups * taps, P], against weights [groups, M/groups, C/groups * taps].
  const ValueId col = d.op(Op::reshape, {all}, {{"shape", Shape{xs[0], Dim(groups), Dim(ch / groups * taps), Dim(positions)}}});
  const ValueId wm = d.op(Op::reshape, {w}, {{"shape", Shape{Dim(groups), Dim(m / groups), Dim(ch / groups * taps)}}});
  ValueId y = d.op(Op::reshape, {d.op(Op::matmul, {wm, col})}, {{"shape", out}});
  if (d.in.size() > 2) {
    Shape bs(out.size() - 1, Dim(1));
    bs[0] = Dim(m);
    y = d.op(Op::add, {y, d.op(Op::reshape, {d.in[2]}, {{"shape", bs}})});
  }
  return last ? d.op(Op::permute, {y}, {{"perm", channels_last_perm(r)}}) : y;
}


// Reverse mode, as convolutions:
//   - the input's cotangent is a stride-1 convolution of dy with stride - 1
//     zeros between its elements, padded by (k-1)*dilation - pad_begin
//     before (cropped where negative) and to the input's length after, by
//     the weights with their spatial dims flipped and their channel dims
//     swapped per group ([M, C/g, k..] -> [C, M/g, k..]);
//   - the weights' cotangent is a convolution over the batch: the input as
//     [C/g, g*N, d..] (its channels the groups' images) by dy as
//     [M, N, o..], groups g, stride the dilation and dilation the stride,
//     the input cropped or padded so that the result is [C/g, M, k..];
//   - the bias' is dy summed over the batch and the output positions.
// Channels last: the same, on the input and cotangent permuted to channels
// first, the input's cotangent permuted back.
void d_conv(Differ& d) {
  const bool last = d.n.attr_bool("channels_last");
  const int64_t r = d.n.type.rank();
  auto first = [&](ValueId v) { return last ? d.op(Op::permute, {v}, {{"perm", channels_first_perm(r)}}) : v; };
  const ValueId x = first(d.x(0)), w = d.x(1), dy = first(d.dy);
  const Type xt = d.type(x), wt = d.type(w), yt = d.type(dy);
  const size_t k = wt.rank() - 2;
  const auto stride = d.n.attr_ints("stride"), dil = d.n.attr_ints("dilation"), pb = d.n.attr_ints("pad_begin");
  const int64_t G = d.n.attr_int("groups"), C = xt.shape[1].value(), M = wt.shape[0].value(), Cg = C / G, Mg = M / G;
  const Dim N = xt.shape[0];
  std::vector<int64_t> in, ker, out;
  for (size_t i = 0; i < k; ++i) in.push_back(xt.shape[i + 2].value()), ker.push_back(wt.shape[i + 2].value()), out.push_back(yt.shape[i + 2].value());
  auto slice = [&](ValueId v, int64_t axis, int64_t from, int64_t to) {
    return d.op(Op::slice, {v}, {{"axis", axis}, {"start", Dim(from)}, {"end", Dim(to)}});
  };
  auto conv = [&](ValueId a, ValueId b, std::vector<int64_t> st, std::vector<int64_t> dl, std::vector<int64_t> p0, std::vector<int64_t> p1, int64_t groups) {
    return d.op(Op::conv, {a, b}, {{"stride", st}, {"dilation", dl}, {"pad_begin", p0}, {"pad_end", p1}, {"groups", groups}});
  };
  if (d.wants(0)) {
    ValueId g = dy;
    std::vector<int64_t> p0(k), p1(k);
    for (size_t i = 0; i < k; ++i) {
      const int64_t axis = static_cast<int64_t>(i + 2), s = stride[i];
      int64_t len = out[i];
      if (s > 1) {  // stride - 1 zeros after each element, the last ones dropped
        const ValueId col = d.op(Op::unsqueeze, {g}, {{"axes", std::vector<int64_t>{axis + 1}}});
        Shape zs = d.type(col).shape;
        zs[static_cast<size_t>(axis + 1)] = Dim(s - 1);
        Shape merged = d.type(g).shape;
        merged[static_cast<size_t>(axis)] = Dim(len * s);
        const ValueId z = d.op(Op::expand, {d.c(0.0)}, {{"shape", zs}});
        g = slice(d.op(Op::reshape, {d.op(Op::concat, {col, z}, {{"axis", axis + 1}})}, {{"shape", merged}}), axis, 0, (len - 1) * s + 1);
        len = (len - 1) * s + 1;
      }
      int64_t b = (ker[i] - 1) * dil[i] - pb[i], e = in[i] - len + pb[i];
      if (b < 0) g = slice(g, axis, -b, len), len += b, b = 0;
      if (e < 0) g = slice(g, axis, 0, len + e), e = 0;
      p0[i] = b, p1[i] = e;
    }
    // [M, C/g, k..] -> [g, M/g, C/g, k..] -> [g, C/g, M/g, k..] -> [C, M/g, k..], flipped.
    Shape grouped{Dim(G), Dim(Mg), Dim(Cg)}, back{Dim(C), Dim(Mg)};
    std::vector<int64_t> perm{0, 2, 1};
    for (size_t i = 0; i < k; ++i) grouped.push_back(Dim(ker[i])), back.push_back(Dim(ker[i])), perm.push_back(static_cast<int64_t>(i + 3));
    ValueId wf = d.op(Op::reshape, {d.op(Op::permute, {d.op(Op::reshape, {w}, {{"shape", grouped}})}, {{"perm", perm}})}, {{"shape", back}});
    for (size_t i = 0; i < k; ++i) {
      if (ker[i] == 1) continue;
      std::vector<double> rev;
      for (int64_t t = ker[i] - 1; t >= 0; --t) rev.push_back(static_cast<double>(t));
      wf = d.op(Op::gather, {wf, d.g.add_const({DType::i64, {Dim(ker[i])}}, rev)}, {{"axis", static_cast<int64_t>(i + 2)}});
    }
    const ValueId dx = conv(g, wf, std::vector<int64_t>(k, 1), dil, p0, p1, G);
    d.give(0, last ? d.op(Op::permute, {dx}, {{"perm", channels_last_perm(r)}}) : dx);
  }
  if (d.wants(1)) {
    // x [N, C, d..] -> [N, g, C/g, d..] -> [C/g, g, N, d..] -> [C/g, g*N, d..].
    Shape xg{N, Dim(G), Dim(Cg)}, xb{Dim(Cg), Dim(G) * N};
    std::vector<int64_t> xp{2, 1, 0};
    // dy [N, M, o..] -> [N, g, M/g, o..] -> [g, M/g, N, o..] -> [M, N, o..].
    Shape yg{N, Dim(G), Dim(Mg)}, yb{Dim(M), N};
    std::vector<int64_t> yp{1, 2, 0};
    for (size_t i = 0; i < k; ++i) {
      xg.push_back(Dim(in[i])), xb.push_back(Dim(in[i])), xp.push_back(static_cast<int64_t>(i + 3));
      yg.push_back(Dim(out[i])), yb.push_back(Dim(out[i])), yp.push_back(static_cast<int64_t>(i + 3));
    }
    ValueId xs = d.op(Op::reshape, {d.op(Op::permute, {d.op(Op::reshape, {x}, {{"shape", xg}})}, {{"perm", xp}})}, {{"shape", xb}});
    const ValueId ys = d.op(Op::reshape, {d.op(Op::permute, {d.op(Op::reshape, {dy}, {{"shape", yg}})}, {{"perm", yp}})}, {{"shape", yb}});
    // Its length after the begin pad: exactly what k taps at the dilation read.
    std::vector<int64_t> p1(k);
    for (size_t i = 0; i < k; ++i) {
      const int64_t need = (ker[i] - 1) * dil[i] + (out[i] - 1) * stride[i] + 1 - pb[i];  // input positions read, past the begin pad
      if (need < in[i]) xs = slice(xs, static_cast<int64_t>(i + 2), 0, need);
      p1[i] = std::max<int64_t>(0, need - in[i]);
    }
    const ValueId gw = conv(xs, ys, dil, stride, pb, p1, G);  // [C/g, M, k..]
    std::vector<int64_t> back{1, 0};
    for (size_t i = 0; i < k; ++i) back.push_back(static_cast<int64_t>(i + 2));
    d.give(1, d.op(Op::permute, {gw}, {{"perm", back}}));
  }
  if (d.n.inputs.size() > 2 && d.wants(2)) {
    std::vector<int64_t> axes{0};
    for (size_t i = 0; i < k; ++i) axes.push_back(static_cast<int64_t>(i + 2));
    d.give(2, d.op(Op::sum, {dy}, {{"axes", axes}}));
  }
}

}  // namespace

namespace rows {

std::vector<OpDef> conv() {
  const std::vector<int64_t> none;
  return {
      {.op = Op::conv, .name = "conv", .category = Cat::matmul, .min_inputs = 2, .max_inputs = 4,
       .attrs = {{"stride", AK::Ints, AttrValue(none)}, {"dilation", AK::Ints, AttrValue(none)}, {"pad_begin", AK::Ints, AttrValue(none)},
                 {"pad_end", AK::Ints, AttrValue(none)}, {"groups", AK::Int, AttrValue(int64_t{1})},
                 {"channels_last", AK::Bool, AttrValue(false)}, {"winograd", AK::Bool, AttrValue(false)}},
       .infer = infer_conv, .fuse = Fuse::conv, .flops_fn = conv_flops, .decompose = conv_windows, .grad = d_conv},
  };
}

}  // namespace rows

}  // namespace tj
