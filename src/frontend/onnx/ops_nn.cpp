// ONNX converters: contractions (MatMul, Gemm, Einsum), normalizations,
// convolution and pooling. Conv, the pools and the norms are the shared
// builders of tensorjit/nn.h; here are ONNX's attributes (auto_pad,
// output_shape, storage_order) turned into their options.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "frontend/onnx/context.h"

namespace tj::onnx_import {

namespace {

R matmul_(Ctx& c) {
  Tensor a = c.in(0), b = c.in(1);
  // 1-D operands as numpy: promoted to a matrix, the added dim dropped after.
  bool va = a.rank() == 1, vb = b.rank() == 1;
  if (va) a = unsqueeze(a, {0});
  if (vb) b = unsqueeze(b, {1});
  Tensor r = matmul(a, b);
  if (va) r = squeeze(r, {r.rank() - 2});
  if (vb) r = squeeze(r, {r.rank() - 1});
  return {v(r)};
}

// Y = alpha * A' @ B' + beta * C.
R gemm(Ctx& c) {
  Tensor a = c.in(0), b = c.in(1);
  if (c.attr_int("transA", 0)) a = transpose(a);
  if (c.attr_int("transB", 0)) b = transpose(b);
  Tensor y = matmul(a, b);
  if (double alpha = c.attr_float("alpha", 1.0); alpha != 1.0) y = y * alpha;
  if (c.has_input(2)) {
    Tensor bias = c.in(2);
    if (double beta = c.attr_float("beta", 1.0); beta != 1.0) bias = bias * beta;
    y = y + bias;
  }
  return {v(y)};
}

// ---- einsum ----------------------------------------------------------------

// Labels of each operand and of the result ("..." given letters of its own).
struct Equation {
  std::vector<std::string> in;
  std::string out;
};

Equation parse_einsum(Ctx& c, std::string eq, const std::vector<int64_t>& ranks) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::optional<std::string> rhs;
  if (arrow != std::string::npos) rhs = eq.substr(arrow + 2);
  Equation e;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    e.in.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (e.in.size() != ranks.size()) c.fail("the equation has " + std::to_string(e.in.size()) + " operands, the node " + std::to_string(ranks.size()));
  // "..." stands for the leading dims not named; they broadcast right-aligned
  // and take the labels '0', '1', ... (not letters).
  int64_t ell = 0;
  for (size_t i = 0; i < e.in.size(); ++i)
    if (e.in[i].find("...") != std::string::npos) ell = std::max<int64_t>(ell, ranks[i] - static_cast<int64_t>(e.in[i].size() - 3));
  auto expand_ell = [&](std::string s, int64_t n) {
    size_t p = s.find("...");
    if (p == std::string::npos) return s;
    std::string labels;
    for (int64_t k = ell - n; k < ell; ++k) labels += static_cast<char>('0' + k);
    return s.substr(0, p) + labels + s.substr(p + 3);
  };
  for (size_t i = 0; i < e.in.size(); ++i) {
    int64_t named = static_cast<int64_t>(e.in[i].size()) - (e.in[i].find("...") != std::string::npos ? 3 : 0);
    e.in[i] = expand_ell(e.in[i], ranks[i] - named);
    if (static_cast<int64_t>(e.in[i].size()) != ranks[i]) c.fail("operand " + std::to_string(i) + " has rank " + std::to_string(ranks[i]) + ", the equation names " + std::to_string(e.in[i].size()) + " dims");
  }
  if (rhs) {
    e.out = expand_ell(*rhs, ell);
  } else {  // implicit: the broadcast dims, then the labels used once, sorted
    std::map<char, int> count;
    for (const auto& s : e.in)
      for (char ch : s) ++count[ch];
    for (int64_t k = 0; k < ell; ++k) e.out += static_cast<char>('0' + k);
    for (auto [ch, n] : count)
      if (n == 1 && !(ch >= '0' && ch <= '9')) e.out += ch;
  }
  return e;
}

// x (labelled `labels`) with each label repeated within it replaced by
// the diagonal over its axes ("ii" -> "i"): the two axes moved last, merged,
// and every (n+1)-th element taken. The label goes last.
Tensor diagonals(Ctx& c, Tensor x, std::string& labels) {
  for (;;) {
    size_t p = std::string::npos, q = std::string::npos;
    for (size_t i = 0; i < labels.size() && q == std::string::npos; ++i)
      for (size_t j = i + 1; j < labels.size(); ++j)
        if (labels[i] == labels[j]) {
          p = i, q = j;
          break;
        }
    if (q == std::string::npos) return x;
    int64_t n = static_dim(c, x, static_cast<int64_t>(p), "Einsum's diagonal over a symbolic dim");
    if (static_dim(c, x, static_cast<int64_t>(q), "Einsum's diagonal over a symbolic dim") != n)
      c.fail(std::string("label '") + labels[p] + "' names dims of different sizes");
    std::vector<int64_t> perm;
    std::string rest;
    Shape merged;
    for (size_t i = 0; i < labels.size(); ++i)
      if (i != p && i != q) perm.push_back(static_cast<int64_t>(i)), rest += labels[i], merged.push_back(x.shape()[i]);
    perm.push_back(static_cast<int64_t>(p)), perm.push_back(static_cast<int64_t>(q));
    merged.push_back(Dim(n * n));
    std::vector<int64_t> at;
    for (int64_t k = 0; k < n; ++k) at.push_back(k * (n + 1));
    x = take(c, reshape(permute(x, perm), merged), static_cast<int64_t>(merged.size()) - 1, at);
    labels = rest + labels[p];
  }
}

// x, labelled `have`, with the labels not in `keep` summed away.
Tensor sum_away(const Tensor& x, std::string& have, const std::string& keep) {
  std::vector<int64_t> axes;
  std::string left;
  for (size_t i = 0; i < have.size(); ++i)
    if (keep.find(have[i]) == std::string::npos) axes.push_back(static_cast<int64_t>(i));
    else left += have[i];
  have = left;
  return axes.empty() ? x : sum(x, axes);
}

Tensor permute_to(const Tensor& x, const std::string& have, const std::string& want) {
  std::vector<int64_t> perm;
  for (char ch : want) perm.push_back(static_cast<int64_t>(have.find(ch)));
  bool id = true;
  for (size_t i = 0; i < perm.size(); ++i) id = id && perm[i] == static_cast<int64_t>(i);
  return id ? x : permute(x, perm);
}

Dim dim_of(const Tensor& x, const std::string& labels, char ch) { return x.shape()[labels.find(ch)]; }

// a (labelled la) and b (lb) contracted to the labels `keep` needs, as one
// batched matmul: [batch.., M, K] @ [batch.., K, N].
Tensor contract(Tensor a, std::string la, Tensor b, std::string lb, const std::string& keep, std::string* lout) {
  std::string need_a = keep + lb, need_b = keep + la;
  a = sum_away(a, la, need_a);
  b = sum_away(b, lb, need_b);
  std::string batch, con, fa, fb;
  for (char ch : la)
    if (lb.find(ch) != std::string::npos) (keep.find(ch) != std::string::npos ? batch : con) += ch;
    else fa += ch;
  for (char ch : lb)
    if (la.find(ch) == std::string::npos) fb += ch;
  Tensor pa = permute_to(a, la, batch + fa + con), pb = permute_to(b, lb, batch + con + fb);
  Shape sa, sb, so;
  Dim m(1), k(1), n(1);
  for (char ch : batch) {
    Dim da = dim_of(a, la, ch), db = dim_of(b, lb, ch);
    sa.push_back(da), sb.push_back(db), so.push_back(da == Dim(1) ? db : da);
  }
  for (char ch : fa) m = m * dim_of(a, la, ch), so.push_back(dim_of(a, la, ch));
  for (char ch : con) k = k * dim_of(a, la, ch);
  for (char ch : fb) n = n * dim_of(b, lb, ch), so.push_back(dim_of(b, lb, ch));
  sa.push_back(m), sa.push_back(k), sb.push_back(k), sb.push_back(n);
  Tensor r = reshape(matmul(reshape(pa, sa), reshape(pb, sb)), so);
  *lout = batch + fa + fb;
  return r;
}

R einsum(Ctx& c) {
  const auto* a = c.attr("equation");
  if (!a) c.fail("Einsum needs an equation");
  std::vector<int64_t> ranks;
  for (int i = 0; i < c.node->input_size(); ++i) ranks.push_back(c.in(static_cast<size_t>(i)).rank());
  Equation e = parse_einsum(c, a->s(), ranks);
  std::vector<Tensor> ops;
  for (size_t i = 0; i < e.in.size(); ++i) ops.push_back(diagonals(c, c.in(i), e.in[i]));
  Tensor acc = ops[0];
  std::string have = e.in[0];
  for (size_t i = 1; i < e.in.size(); ++i) {
    std::string later = e.out;
    for (size_t j = i + 1; j < e.in.size(); ++j) later += e.in[j];
    acc = contract(acc, have, ops[i], e.in[i], later, &have);
  }
  acc = sum_away(acc, have, e.out);
  for (char ch : e.out)
    if (have.find(ch) == std::string::npos) c.fail(std::string("the result names '") + ch + "', which no operand has");
  return {v(permute_to(acc, have, e.out))};
}

// ---- normalization ---------------------------------------------------------

// Over axes [axis, rank). Mean and InvStdDev keep the reduced dims as 1.
// Scale and B broadcast to the normalized dims.
R layer_norm_(Ctx& c) {
  Tensor x = c.in(0);
  int64_t axis = axis_of(c, c.attr_int("axis", -1), x.rank());
  double eps = c.attr_float("epsilon", 1e-5);
  Shape normalized(x.shape().begin() + axis, x.shape().end());
  Tensor w = c.in(1), b = c.has_input(2) ? c.in(2) : Tensor();
  if (w.shape() == normalized && (!b.defined() || b.shape() == normalized)) {
    Normalized n = layer_norm(x, axis, w, b, eps);
    return {v(n.y), v(n.mean), v(n.rstd)};
  }
  Normalized n = layer_norm(x, axis, Tensor(), Tensor(), eps);
  Tensor y = n.y * w;
  if (b.defined()) y = y + b;
  return {v(y), v(n.mean), v(n.rstd)};
}

// x / sqrt(mean(x^2 over [axis, rank)) + eps) * scale: the fused rms_norm
// op over the last axis with a [D] scale.
R rms_norm_(Ctx& c) {
  Tensor x = c.in(0);
  int64_t axis = axis_of(c, c.attr_int("axis", -1), x.rank());
  double eps = c.attr_float("epsilon", 1e-5);
  Tensor scale = c.in(1);
  if (axis == x.rank() - 1 && scale.rank() == 1 && scale.shape()[0] == x.shape().back()) return {v(rms_norm(x, scale, eps))};
  std::vector<int64_t> axes;
  for (int64_t i = axis; i < x.rank(); ++i) axes.push_back(i);
  return {v(x * rsqrt(mean(x * x, axes, true) + eps) * scale)};
}

// x / its p-norm along the axis (p 1 or 2).
R lp_norm(Ctx& c) {
  Tensor x = c.in(0);
  int64_t axis = axis_of(c, c.attr_int("axis", -1), x.rank());
  int64_t p = c.attr_int("p", 2);
  if (p != 1 && p != 2) c.fail("p must be 1 or 2, got " + std::to_string(p));
  Tensor norm = p == 1 ? sum(abs(x), {axis}, true) : sqrt(sum(x * x, {axis}, true));
  return {v(where(eq(norm, c.scalar(0, x.dtype())), c.scalar(0, x.dtype()), x / norm))};  // a zero vector stays 0
}

// Inference: the running statistics. Training mode (opset 14 on): the
// batch's own mean and (population) variance, and the running statistics
// come out updated: running * momentum + batch * (1 - momentum), as the
// spec's reference.
R batch_norm(Ctx& c) {
  Tensor x = c.in(0);
  double eps = c.attr_float("epsilon", 1e-5);
  if (!c.attr_int("training_mode", 0)) return {v(tj::batch_norm(x, c.in(1), c.in(2), c.in(3), c.in(4), eps))};
  double momentum = c.attr_float("momentum", 0.9);
  Normalized n = batch_norm_train(x, c.in(1), c.in(2), eps);
  return {v(n.y), v(c.in(3) * momentum + n.mean * (1 - momentum)), v(c.in(4) * momentum + n.var * (1 - momentum))};
}

// A group norm with a group per channel.
R instance_norm(Ctx& c) {
  Tensor x = c.in(0);
  if (x.rank() < 3) c.fail("the input must be [N, C, d..], got " + x.type().str());
  int64_t ch = static_dim(c, x, 1, "InstanceNormalization of a symbolic channel dim");
  return {v(group_norm(x, ch, c.in(1), c.in(2), c.attr_float("epsilon", 1e-5)).y)};
}

template <bool Max>
R global_pool(Ctx& c) {
  Tensor x = c.in(0);
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < x.rank(); ++i) axes.push_back(i);
  return {v(Max ? amax(x, axes, true) : mean(x, axes, true))};
}

// ---- convolution and pooling -------------------------------------------------

// The spatial sizes of [N, C, d..] (static; N may be symbolic).
std::vector<int64_t> spatial_dims(const Ctx& c, const Tensor& x, const char* why) {
  if (x.rank() < 3) c.fail("the input must be [N, C, d..], got " + x.type().str());
  std::vector<int64_t> s;
  for (int64_t i = 2; i < x.rank(); ++i) s.push_back(static_dim(c, x, i, why));
  return s;
}

// ONNX's window attributes as a builder's options: strides and dilations
// (default 1), pads [b.., e..], or auto_pad's: SAME_* pads to ceil(in /
// stride) outputs, the odd one at the end (UPPER) or the beginning (LOWER).
template <class Options>
Options window_options(Ctx& c, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel) {
  size_t n = in.size();
  Options o;
  o.stride = c.attr_ints("strides", std::vector<int64_t>(n, 1));
  o.dilation = c.attr_ints("dilations", std::vector<int64_t>(n, 1));
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (kernel.size() != n || o.stride.size() != n || o.dilation.size() != n || pads.size() != 2 * n)
    c.fail("kernel_shape, strides, dilations or pads do not match the spatial rank " + std::to_string(n));
  for (int64_t s : o.stride)
    if (s < 1 || s > (int64_t{1} << 31)) c.fail("a stride of " + std::to_string(s));
  for (int64_t d : o.dilation)
    if (d < 1 || d > (int64_t{1} << 31)) c.fail("a dilation of " + std::to_string(d));
  const auto* ap = c.attr("auto_pad");
  std::string auto_pad = ap ? ap->s() : "NOTSET";
  o.pad_begin.assign(pads.begin(), pads.begin() + static_cast<int64_t>(n));
  o.pad_end.assign(pads.begin() + static_cast<int64_t>(n), pads.end());
  for (size_t i = 0; i < n; ++i) {
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      if (kernel[i] < 1 || kernel[i] > (int64_t{1} << 31)) c.fail("kernel sizes must be positive");
      int64_t span = (kernel[i] - 1) * o.dilation[i] + 1;
      int64_t out = (in[i] + o.stride[i] - 1) / o.stride[i];
      int64_t total = std::max<int64_t>((out - 1) * o.stride[i] + span - in[i], 0);
      o.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      o.pad_end[i] = total - o.pad_begin[i];
    } else if (auto_pad == "VALID") {
      o.pad_begin[i] = o.pad_end[i] = 0;
    } else if (auto_pad != "NOTSET") {
      c.fail("unknown auto_pad '" + auto_pad + "'");
    }
  }
  return o;
}

R conv(Ctx& c) {
  Tensor x = c.in(0), wt = c.in(1);
  std::vector<int64_t> xs = spatial_dims(c, x, "Conv of a symbolic spatial dim");
  std::vector<int64_t> ws = static_shape(c, wt, "Conv of symbolic weights");
  if (ws.size() != xs.size() + 2) c.fail("Conv needs [N, C, d..] input and [M, C/group, k..] weights of the same rank");
  std::vector<int64_t> ks(ws.begin() + 2, ws.end());
  if (auto k = c.attr_ints("kernel_shape", ks); k != ks) c.fail("kernel_shape differs from the weights'");
  ConvOptions o = window_options<ConvOptions>(c, xs, ks);
  o.groups = c.attr_int("group", 1);
  return {v(tj::conv(x, wt, c.has_input(2) ? c.in(2) : Tensor(), o))};
}

// output_shape or SAME_* auto_pad decide the pads: the full result's size
// less the one wanted, split as SAME_* splits (negative: zeros appended).
R conv_transpose(Ctx& c) {
  Tensor x = c.in(0), wt = c.in(1);
  std::vector<int64_t> xs = spatial_dims(c, x, "ConvTranspose of a symbolic spatial dim");
  std::vector<int64_t> ws = static_shape(c, wt, "ConvTranspose of symbolic weights");
  size_t sp = xs.size();
  if (ws.size() != sp + 2) c.fail("ConvTranspose needs [N, C, d..] input and [C, M/group, k..] weights of the same rank");
  std::vector<int64_t> ks(ws.begin() + 2, ws.end());
  ConvTransposeOptions o;
  o.groups = c.attr_int("group", 1);
  o.stride = c.attr_ints("strides", std::vector<int64_t>(sp, 1));
  o.dilation = c.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  o.output_padding = c.attr_ints("output_padding", std::vector<int64_t>(sp, 0));
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  std::vector<int64_t> out_shape = c.attr_ints("output_shape", {});
  if (o.stride.size() != sp || o.dilation.size() != sp || o.output_padding.size() != sp || pads.size() != 2 * sp)
    c.fail("strides, dilations, pads or output_padding do not match the spatial rank");
  constexpr int64_t kMax = int64_t{1} << 31;
  for (const auto* l : {&o.stride, &o.dilation, &o.output_padding, &pads, &out_shape, &ks})
    for (int64_t e : *l)
      if (e < -kMax || e > kMax) c.fail("a stride, dilation or pad of " + std::to_string(e) + " is out of range");
  const auto* ap = c.attr("auto_pad");
  std::string auto_pad = ap ? ap->s() : "NOTSET";
  for (size_t i = 0; i < sp; ++i) {
    if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t span = (ks[i] - 1) * o.dilation[i] + 1, full = o.stride[i] * (xs[i] - 1) + o.output_padding[i] + span;
      int64_t want = !out_shape.empty() ? out_shape.at(out_shape.size() - sp + i) : xs[i] * o.stride[i];
      int64_t total = full - want;  // negative: zeros appended at the end
      bool upper = auto_pad != "SAME_LOWER";
      pads[i] = total < 0 ? 0 : upper ? total / 2 : total - total / 2;
      pads[i + sp] = total - pads[i];
    } else if (auto_pad == "VALID") {
      pads[i] = pads[i + sp] = 0;
    }
  }
  o.pad_begin.assign(pads.begin(), pads.begin() + static_cast<int64_t>(sp));
  o.pad_end.assign(pads.begin() + static_cast<int64_t>(sp), pads.end());
  return {v(tj::conv_transpose(x, wt, c.has_input(2) ? c.in(2) : Tensor(), o))};
}

PoolOptions pool_options(Ctx& c, const Tensor& x, const char* why) {
  std::vector<int64_t> k = c.attr_ints("kernel_shape", {});
  if (k.empty()) c.fail("kernel_shape is required");
  std::vector<int64_t> xs = spatial_dims(c, x, why);
  if (k.size() != xs.size()) c.fail("kernel_shape does not match the input's spatial rank");
  PoolOptions o = window_options<PoolOptions>(c, xs, k);
  o.kernel = k;
  o.ceil_mode = c.attr_int("ceil_mode", 0) != 0;
  return o;
}

// The maximum of each window; with the Indices output, also where it is:
// the flat index into the input of each window's first maximum (with
// storage_order 1, the spatial dims counted column-major).
R max_pool(Ctx& c) {
  Tensor x = c.in(0);
  PoolOptions o = pool_options(c, x, "MaxPool of a symbolic spatial dim");
  const bool indices = c.node->output_size() > 1 && !c.node->output(1).empty();
  if (!indices) return {v(tj::max_pool(x, o))};
  ValuesAndIndices r = max_pool_with_indices(x, o, c.attr_int("storage_order", 0) != 0);
  // The builder's index is within a [d..] plane; ONNX's counts every plane
  // before it: + (n * C + c) * plane.
  std::vector<int64_t> xs = spatial_dims(c, x, "MaxPool of a symbolic spatial dim");
  int64_t plane = 1;
  for (int64_t d : xs) plane *= d;
  Dim planes = x.shape()[0] * x.shape()[1];
  Shape s = {x.shape()[0], x.shape()[1]};
  for (size_t i = 2; i < static_cast<size_t>(r.indices.rank()); ++i) s.push_back(Dim(1));
  Tensor base = reshape(iota(x, planes), s) * static_cast<double>(plane);
  return {v(r.values), v(r.indices + base)};
}

// (sum of |x|^p over each window)^(1/p): the windows' sums (an average
// pool divided by 1, zeros in the pads).
R lp_pool(Ctx& c) {
  Tensor x = c.in(0);
  PoolOptions o = pool_options(c, x, "LpPool of a symbolic spatial dim");
  double p = static_cast<double>(c.attr_int("p", 2));
  Tensor s = avg_pool(pow(abs(x), p), o, true, 1);
  return {v(pow(s, 1.0 / p))};
}

R col2im_(Ctx& c) {
  std::vector<int64_t> image = c.known_ints(1, "image_shape"), block = c.known_ints(2, "block_shape");
  size_t k = image.size();
  ConvOptions o;
  o.stride = c.attr_ints("strides", std::vector<int64_t>(k, 1));
  o.dilation = c.attr_ints("dilations", std::vector<int64_t>(k, 1));
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * k, 0));
  if (pads.size() != 2 * k) c.fail("pads do not match the image's rank");
  o.pad_begin.assign(pads.begin(), pads.begin() + static_cast<int64_t>(k));
  o.pad_end.assign(pads.begin() + static_cast<int64_t>(k), pads.end());
  return {v(col2im(c.in(0), image, block, o))};
}

R average_pool(Ctx& c) {
  Tensor x = c.in(0);
  PoolOptions o = pool_options(c, x, "AveragePool of a symbolic spatial dim");
  return {v(avg_pool(x, o, c.attr_int("count_include_pad", 0) != 0))};
}


}  // namespace

void add_nn_ops(ConverterTable& t) {
  t.insert({
      {"MatMul", matmul_}, {"Gemm", gemm}, {"Einsum", einsum},
      {"LayerNormalization", layer_norm_}, {"BatchNormalization", batch_norm}, {"InstanceNormalization", instance_norm},
      {"GlobalAveragePool", global_pool<false>}, {"GlobalMaxPool", global_pool<true>},
      {"Conv", conv}, {"ConvTranspose", conv_transpose}, {"MaxPool", max_pool}, {"AveragePool", average_pool}, {"LpPool", lp_pool}, {"Col2Im", col2im_},
      {"RMSNormalization", rms_norm_}, {"LpNormalization", lp_norm},
  });
}

}  // namespace tj::onnx_import
