// The composite layers of tensorjit/nn.h over proxies (tensorjit.nn, and
// the torch backend's aten rows): the same C++ builders the ONNX
// converters call. Absent optional tensors are None; per-dim lists may be
// empty (the default).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "proxy.h"
#include "tensorjit/error.h"
#include "tensorjit/nn.h"

namespace tj::py {

namespace {

using Ints = std::vector<int64_t>;
using Opt = std::optional<Proxy>;

Tensor opt(const Opt& p) { return p ? p->get() : Tensor(); }

nb::tuple pair(const ValuesAndIndices& r) { return nb::make_tuple(wrap(r.values), wrap(r.indices)); }

PoolOptions pool(Ints kernel, Ints stride, Ints dilation, Ints pad_begin, Ints pad_end, bool ceil_mode) {
  PoolOptions o;
  o.kernel = std::move(kernel), o.stride = std::move(stride), o.dilation = std::move(dilation);
  o.pad_begin = std::move(pad_begin), o.pad_end = std::move(pad_end), o.ceil_mode = ceil_mode;
  return o;
}

PadMode pad_mode(const std::string& m) {
  if (m == "constant") return PadMode::constant;
  if (m == "reflect") return PadMode::reflect;
  if (m == "edge" || m == "replicate") return PadMode::edge;
  if (m == "wrap" || m == "circular") return PadMode::wrap;
  throw Error("pad: unknown mode '" + m + "' (constant, reflect, edge or replicate, wrap or circular)");
}

}  // namespace

void bind_nn(nb::module_& m) {
  auto ints = [](const char* name) { return nb::arg(name) = Ints{}; };
  m.def("conv", [](const Proxy& x, const Proxy& w, const Opt& bias, Ints stride, Ints dilation, Ints pad_begin, Ints pad_end, int64_t groups) {
    ConvOptions o;
    o.stride = std::move(stride), o.dilation = std::move(dilation), o.pad_begin = std::move(pad_begin), o.pad_end = std::move(pad_end);
    o.groups = groups;
    return wrap(conv(x.get(), w.get(), opt(bias), o));
  }, nb::arg("x"), nb::arg("w"), nb::arg("bias") = nb::none(), ints("stride"), ints("dilation"), ints("pad_begin"), ints("pad_end"),
        nb::arg("groups") = 1, "Convolution of [N, C, d..] with weights [M, C/groups, k..] (tensorjit/nn.h).");
  m.def("conv_weight_grad", [](const Proxy& x, const Proxy& grad, Ints kernel, Ints stride, Ints dilation, Ints pad_begin, Ints pad_end, int64_t groups) {
    ConvOptions o;
    o.stride = std::move(stride), o.dilation = std::move(dilation), o.pad_begin = std::move(pad_begin), o.pad_end = std::move(pad_end);
    o.groups = groups;
    return wrap(conv_weight_grad(x.get(), grad.get(), kernel, o));
  }, nb::arg("x"), nb::arg("grad"), nb::arg("kernel"), ints("stride"), ints("dilation"), ints("pad_begin"), ints("pad_end"), nb::arg("groups") = 1,
        "The gradient of conv's weights.");
  m.def("col2im", [](const Proxy& cols, Ints image, Ints kernel, Ints stride, Ints dilation, Ints pad_begin, Ints pad_end) {
    ConvOptions o;
    o.stride = std::move(stride), o.dilation = std::move(dilation), o.pad_begin = std::move(pad_begin), o.pad_end = std::move(pad_end);
    return wrap(col2im(cols.get(), image, kernel, o));
  }, nb::arg("cols"), nb::arg("image"), nb::arg("kernel"), ints("stride"), ints("dilation"), ints("pad_begin"), ints("pad_end"));
  m.def("conv_transpose", [](const Proxy& x, const Proxy& w, const Opt& bias, Ints stride, Ints dilation, Ints pad_begin, Ints pad_end,
                             Ints output_padding, int64_t groups) {
    ConvTransposeOptions o;
    o.stride = std::move(stride), o.dilation = std::move(dilation), o.pad_begin = std::move(pad_begin), o.pad_end = std::move(pad_end);
    o.output_padding = std::move(output_padding), o.groups = groups;
    return wrap(conv_transpose(x.get(), w.get(), opt(bias), o));
  }, nb::arg("x"), nb::arg("w"), nb::arg("bias") = nb::none(), ints("stride"), ints("dilation"), ints("pad_begin"), ints("pad_end"),
        ints("output_padding"), nb::arg("groups") = 1, "The transposed convolution, weights [C, M/groups, k..] (tensorjit/nn.h).");
  m.def("max_pool", [](const Proxy& x, Ints kernel, Ints stride, Ints dilation, Ints pad_begin, Ints pad_end, bool ceil_mode) {
    return wrap(max_pool(x.get(), pool(std::move(kernel), std::move(stride), std::move(dilation), std::move(pad_begin), std::move(pad_end), ceil_mode)));
  }, nb::arg("x"), nb::arg("kernel"), ints("stride"), ints("dilation"), ints("pad_begin"), ints("pad_end"), nb::arg("ceil_mode") = false);
  m.def("max_pool_with_indices", [](const Proxy& x, Ints kernel, Ints stride, Ints dilation, Ints pad_begin, Ints pad_end, bool ceil_mode) {
    return pair(max_pool_with_indices(x.get(), pool(std::move(kernel), std::move(stride), std::move(dilation), std::move(pad_begin), std::move(pad_end), ceil_mode)));
  }, nb::arg("x"), nb::arg("kernel"), ints("stride"), ints("dilation"), ints("pad_begin"), ints("pad_end"), nb::arg("ceil_mode") = false,
        "(values, indices): each window's maximum and its flat index within its plane.");
  m.def("avg_pool", [](const Proxy& x, Ints kernel, Ints stride, Ints pad_begin, Ints pad_end, bool ceil_mode, bool count_include_pad, int64_t divisor) {
    return wrap(avg_pool(x.get(), pool(std::move(kernel), std::move(stride), {}, std::move(pad_begin), std::move(pad_end), ceil_mode), count_include_pad, divisor));
  }, nb::arg("x"), nb::arg("kernel"), ints("stride"), ints("pad_begin"), ints("pad_end"), nb::arg("ceil_mode") = false,
        nb::arg("count_include_pad") = true, nb::arg("divisor") = 0);
  m.def("avg_pool_grad", [](const Proxy& grad, const Proxy& x, Ints kernel, Ints stride, Ints pad_begin, Ints pad_end, bool ceil_mode,
                            bool count_include_pad, int64_t divisor) {
    return wrap(avg_pool_grad(grad.get(), x.get(), pool(std::move(kernel), std::move(stride), {}, std::move(pad_begin), std::move(pad_end), ceil_mode),
                              count_include_pad, divisor));
  }, nb::arg("grad"), nb::arg("x"), nb::arg("kernel"), ints("stride"), ints("pad_begin"), ints("pad_end"), nb::arg("ceil_mode") = false,
        nb::arg("count_include_pad") = true, nb::arg("divisor") = 0);
  m.def("adaptive_avg_pool_grad", [](const Proxy& grad, const Proxy& x, Ints out) { return wrap(adaptive_avg_pool_grad(grad.get(), x.get(), out)); },
        nb::arg("grad"), nb::arg("x"), nb::arg("out"));
  m.def("adaptive_avg_pool", [](const Proxy& x, Ints out) { return wrap(adaptive_avg_pool(x.get(), out)); }, nb::arg("x"), nb::arg("out"));
  m.def("adaptive_max_pool", [](const Proxy& x, Ints out) { return pair(adaptive_max_pool(x.get(), out)); }, nb::arg("x"), nb::arg("out"));
  m.def("layer_norm_over", [](const Proxy& x, int64_t first_axis, const Opt& w, const Opt& b, double eps) {
    Normalized n = layer_norm(x.get(), first_axis, opt(w), opt(b), eps);
    return nb::make_tuple(wrap(n.y), wrap(n.mean), wrap(n.rstd));
  }, nb::arg("x"), nb::arg("first_axis"), nb::arg("weight") = nb::none(), nb::arg("bias") = nb::none(), nb::arg("eps") = 1e-5,
        "(y, mean, rstd) normalized over the dims from first_axis on.");
  m.def("batch_norm", [](const Proxy& x, const Opt& w, const Opt& b, const Proxy& mean, const Proxy& var, double eps) {
    return wrap(batch_norm(x.get(), opt(w), opt(b), mean.get(), var.get(), eps));
  }, nb::arg("x"), nb::arg("weight"), nb::arg("bias"), nb::arg("mean"), nb::arg("var"), nb::arg("eps") = 1e-5);
  m.def("batch_norm_train", [](const Proxy& x, const Opt& w, const Opt& b, double eps) {
    Normalized n = batch_norm_train(x.get(), opt(w), opt(b), eps);
    return nb::make_tuple(wrap(n.y), wrap(n.mean), wrap(n.var), wrap(n.rstd));
  }, nb::arg("x"), nb::arg("weight"), nb::arg("bias"), nb::arg("eps") = 1e-5, "(y, mean, var, rstd) with the batch's statistics.");
  m.def("group_norm", [](const Proxy& x, int64_t groups, const Opt& w, const Opt& b, double eps) {
    Normalized n = group_norm(x.get(), groups, opt(w), opt(b), eps);
    return nb::make_tuple(wrap(n.y), wrap(n.mean), wrap(n.rstd));
  }, nb::arg("x"), nb::arg("groups"), nb::arg("weight") = nb::none(), nb::arg("bias") = nb::none(), nb::arg("eps") = 1e-5);
  auto attn = [](double scale, bool causal, int64_t offset, const Opt& bias, bool zero_empty_rows) {
    AttentionOptions o;
    o.scale = scale, o.causal = causal, o.causal_offset = offset, o.bias = opt(bias), o.zero_empty_rows = zero_empty_rows;
    return o;
  };
  m.def("attention", [attn](const Proxy& q, const Proxy& k, const Proxy& v, double scale, bool causal, int64_t offset, const Opt& bias,
                            bool zero_empty_rows) { return wrap(attention(q.get(), k.get(), v.get(), attn(scale, causal, offset, bias, zero_empty_rows))); },
        nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("scale") = 0.0, nb::arg("causal") = false, nb::arg("causal_offset") = 0,
        nb::arg("bias") = nb::none(), nb::arg("zero_empty_rows") = false, "Flash attention (tensorjit/nn.h).");
  m.def("attention_lse", [attn](const Proxy& q, const Proxy& k, double scale, bool causal, int64_t offset, const Opt& bias, bool zero_empty_rows) {
    return wrap(attention_lse(q.get(), k.get(), attn(scale, causal, offset, bias, zero_empty_rows)));
  }, nb::arg("q"), nb::arg("k"), nb::arg("scale") = 0.0, nb::arg("causal") = false, nb::arg("causal_offset") = 0, nb::arg("bias") = nb::none(),
        nb::arg("zero_empty_rows") = false);
  m.def("attention_grad", [attn](const Proxy& q, const Proxy& k, const Proxy& v, const Proxy& out, const Proxy& dout, const Proxy& lse, double scale,
                                 bool causal, int64_t offset, const Opt& bias, bool zero_empty_rows) {
    AttentionGrads g = attention_grad(q.get(), k.get(), v.get(), out.get(), dout.get(), lse.get(), attn(scale, causal, offset, bias, zero_empty_rows));
    return nb::make_tuple(wrap(g.dq), wrap(g.dk), wrap(g.dv));
  }, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"), nb::arg("dout"), nb::arg("lse"), nb::arg("scale") = 0.0, nb::arg("causal") = false,
        nb::arg("causal_offset") = 0, nb::arg("bias") = nb::none(), nb::arg("zero_empty_rows") = false);
  m.def("pad", [](const Proxy& x, Ints begin, Ints end, const std::string& mode, const Opt& fill) {
    return wrap(pad(x.get(), begin, end, pad_mode(mode), opt(fill)));
  }, nb::arg("x"), nb::arg("begin"), nb::arg("end"), nb::arg("mode") = "constant", nb::arg("fill") = nb::none());
  m.def("flip", [](const Proxy& x, Ints axes) { return wrap(flip(x.get(), axes)); }, nb::arg("x"), nb::arg("axes"));
  m.def("roll", [](const Proxy& x, Ints shifts, Ints axes) { return wrap(roll(x.get(), shifts, axes)); }, nb::arg("x"), nb::arg("shifts"),
        ints("axes"));
  m.def("take_along", [](const Proxy& x, const Proxy& idx, int64_t axis) { return wrap(take_along(x.get(), idx.get(), axis)); }, nb::arg("x"),
        nb::arg("indices"), nb::arg("axis"));
  m.def("scatter", [](const Proxy& x, const Proxy& idx, const Proxy& src, int64_t axis, bool add) {
    return wrap(scatter(x.get(), idx.get(), src.get(), axis, add));
  }, nb::arg("x"), nb::arg("indices"), nb::arg("src"), nb::arg("axis"), nb::arg("add") = false);
  m.def("tril", [](const Proxy& x, int64_t k) { return wrap(tril(x.get(), k)); }, nb::arg("x"), nb::arg("k") = 0);
  m.def("triu", [](const Proxy& x, int64_t k) { return wrap(triu(x.get(), k)); }, nb::arg("x"), nb::arg("k") = 0);
  m.def("cumsum", [](const Proxy& x, int64_t axis, bool exclusive, bool reverse) { return wrap(cumsum(x.get(), axis, exclusive, reverse)); },
        nb::arg("x"), nb::arg("axis"), nb::arg("exclusive") = false, nb::arg("reverse") = false);
  m.def("cumprod", [](const Proxy& x, int64_t axis) { return wrap(cumprod(x.get(), axis)); }, nb::arg("x"), nb::arg("axis"));
  m.def("sort", [](const Proxy& x, int64_t axis, bool descending) { return pair(sort(x.get(), axis, descending)); }, nb::arg("x"),
        nb::arg("axis") = -1, nb::arg("descending") = false);
  m.def("topk", [](const Proxy& x, int64_t k, int64_t axis, bool largest) { return pair(topk(x.get(), k, axis, largest)); }, nb::arg("x"),
        nb::arg("k"), nb::arg("axis") = -1, nb::arg("largest") = true);
  m.def("upsample_nearest", [](const Proxy& x, Ints out, std::vector<double> scales) { return wrap(upsample_nearest(x.get(), out, scales)); },
        nb::arg("x"), nb::arg("out"), nb::arg("scales") = std::vector<double>{});
  m.def("upsample_linear", [](const Proxy& x, Ints out, bool align_corners, std::vector<double> scales) {
    return wrap(upsample_linear(x.get(), out, align_corners, scales));
  }, nb::arg("x"), nb::arg("out"), nb::arg("align_corners") = false, nb::arg("scales") = std::vector<double>{});
}

}  // namespace tj::py
