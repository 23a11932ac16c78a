// ONNX converters: contractions (MatMul, Gemm, Einsum), normalizations,
// convolution and pooling. Conv and the pools are written over the IR's ops
// (static channels and spatial dims, any batch): one strided slice of the padded input per kernel offset;
// Conv contracts them with the weights in one matmul per group.
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

// Over axes [axis, rank); the fused layer_norm op when that is the last axis
// alone and only Y is wanted. Mean and InvStdDev keep the reduced dims as 1.
R layer_norm_(Ctx& c) {
  Tensor x = c.in(0);
  int64_t axis = axis_of(c, c.attr_int("axis", -1), x.rank());
  double eps = c.attr_float("epsilon", 1e-5);
  bool stats = (c.node->output_size() > 1 && !c.node->output(1).empty()) || (c.node->output_size() > 2 && !c.node->output(2).empty());
  if (axis == x.rank() - 1 && !stats && x.dtype() != DType::f64) {
    Tensor b = c.has_input(2) ? c.in(2) : expand(c.scalar(0, x.dtype()), {x.shape().back()});
    if (c.in(1).rank() == 1 && b.rank() == 1) return {v(layer_norm(x, c.in(1), b, eps))};
  }
  std::vector<int64_t> axes;
  for (int64_t i = axis; i < x.rank(); ++i) axes.push_back(i);
  Tensor m = mean(x, axes, true), d = x - m;
  Tensor inv = rsqrt(mean(d * d, axes, true) + eps);
  Tensor y = d * inv * c.in(1);
  if (c.has_input(2)) y = y + c.in(2);
  return {v(y), v(m), v(inv)};
}

// A per-channel vector [C] shaped to broadcast over [N, C, d1, ..].
Tensor per_channel(const Ctx& c, const Tensor& p, int64_t rank) {
  if (p.rank() != 1 || rank < 2) c.fail("per-channel operands must be vectors, and the input of rank 2 or more");
  Shape s(static_cast<size_t>(std::max<int64_t>(rank - 1, 1)), Dim(1));
  s[0] = p.shape()[0];
  return reshape(p, s);
}

// Inference: the running statistics. Training mode (opset 14 on): the
// batch's own mean and (population) variance over every axis but the
// channels normalize, and the running statistics come out updated:
// running * momentum + batch * (1 - momentum), as the spec's reference.
R batch_norm(Ctx& c) {
  Tensor x = c.in(0);
  int64_t r = x.rank();
  double eps = c.attr_float("epsilon", 1e-5);
  Tensor scale = per_channel(c, c.in(1), r), bias = per_channel(c, c.in(2), r), m = per_channel(c, c.in(3), r), var = per_channel(c, c.in(4), r);
  if (!c.attr_int("training_mode", 0)) return {v((x - m) * rsqrt(var + eps) * scale + bias)};
  double momentum = c.attr_float("momentum", 0.9);
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < r; ++i)
    if (i != 1) axes.push_back(i);
  Tensor bm = mean(x, axes, true), d = x - bm, bv = mean(d * d, axes, true);
  Tensor y = d * rsqrt(bv + eps) * scale + bias;
  Shape ch{x.shape()[1]};
  Tensor new_mean = c.in(3) * momentum + reshape(bm, ch) * (1 - momentum);
  Tensor new_var = c.in(4) * momentum + reshape(bv, ch) * (1 - momentum);
  return {v(y), v(new_mean), v(new_var)};
}

R instance_norm(Ctx& c) {
  Tensor x = c.in(0);
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < x.rank(); ++i) axes.push_back(i);
  Tensor m = mean(x, axes, true), d = x - m;
  Tensor inv = rsqrt(mean(d * d, axes, true) + c.attr_float("epsilon", 1e-5));
  return {v(d * inv * per_channel(c, c.in(1), x.rank()) + per_channel(c, c.in(2), x.rank()))};
}

template <bool Max>
R global_pool(Ctx& c) {
  Tensor x = c.in(0);
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < x.rank(); ++i) axes.push_back(i);
  return {v(Max ? amax(x, axes, true) : mean(x, axes, true))};
}

// ---- convolution and pooling -------------------------------------------------

// The geometry of a sliding window over the spatial dims of [N, C, d1, ..].
struct Window {
  std::vector<int64_t> in, kernel, stride, dilation, pad_begin, pad_end, out;
};

// Kernel sizes are positive, and their product (the window's offsets, each
// lowered to a slice of its own) is at most 4096.
void check_kernel(const Ctx& c, const std::vector<int64_t>& kernel) {
  constexpr int64_t kMaxTaps = 4096;
  int64_t taps = 1;
  for (int64_t k : kernel) {
    if (k < 1) c.fail("kernel sizes must be positive");
    taps *= k;  // at most kMaxTaps * k: no overflow
    if (taps > kMaxTaps) c.fail("a kernel of more than " + std::to_string(kMaxTaps) + " offsets is not supported (each is lowered to a slice of its own)");
  }
}

// Strides, dilations and pads that keep the window's arithmetic far from
// overflow (spatial sizes are far smaller).
void check_geometry(const Ctx& c, std::initializer_list<const std::vector<int64_t>*> lists) {
  constexpr int64_t kMax = int64_t{1} << 31;
  for (const auto* l : lists)
    for (int64_t v : *l)
      if (v < -kMax || v > kMax) c.fail("a stride, dilation or pad of " + std::to_string(v) + " is out of range");
}

Window window(Ctx& c, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel, bool ceil_mode) {
  check_kernel(c, kernel);
  size_t n = in.size();
  Window w{in, kernel, c.attr_ints("strides", std::vector<int64_t>(n, 1)), c.attr_ints("dilations", std::vector<int64_t>(n, 1)), {}, {}, {}};
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (w.stride.size() != n || w.dilation.size() != n || pads.size() != 2 * n) c.fail("strides, dilations or pads do not match the spatial rank " + std::to_string(n));
  check_geometry(c, {&w.stride, &w.dilation, &pads});
  const auto* ap = c.attr("auto_pad");
  std::string auto_pad = ap ? ap->s() : "NOTSET";
  for (size_t i = 0; i < n; ++i) {
    if (w.stride[i] < 1 || w.dilation[i] < 1) c.fail("strides and dilations must be positive");
    int64_t span = (kernel[i] - 1) * w.dilation[i] + 1;
    int64_t b = pads[i], e = pads[i + n];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t out = (in[i] + w.stride[i] - 1) / w.stride[i];
      int64_t total = std::max<int64_t>((out - 1) * w.stride[i] + span - in[i], 0);
      b = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      e = total - b;
    } else if (auto_pad == "VALID") {
      b = e = 0;
    } else if (auto_pad != "NOTSET") {
      c.fail("unknown auto_pad '" + auto_pad + "'");
    }
    if (b < 0 || e < 0) c.fail("negative pads");
    int64_t room = in[i] + b + e - span;
    if (room < 0) c.fail("the kernel is larger than the padded input");
    int64_t out = (ceil_mode ? (room + w.stride[i] - 1) / w.stride[i] : room / w.stride[i]) + 1;
    // A window of ceil_mode must start inside the input or the begin pad.
    if (ceil_mode && (out - 1) * w.stride[i] >= in[i] + b) --out;
    e += std::max<int64_t>((out - 1) * w.stride[i] + span - (in[i] + b + e), 0);  // room for ceil_mode's last window
    w.pad_begin.push_back(b), w.pad_end.push_back(e), w.out.push_back(out);
  }
  return w;
}

// x [N, C, d..] padded on the spatial dims with `fill`.
Tensor pad_spatial(Ctx& c, Tensor x, const Window& w, double fill) {
  Tensor f = c.scalar(fill, x.dtype());
  for (size_t i = 0; i < w.in.size(); ++i) x = pad_axis(x, static_cast<int64_t>(i) + 2, w.pad_begin[i], w.pad_end[i], f);
  return x;
}

// Per kernel offset (row-major over the kernel), the input under it at
// every output position: [N, C, out..]. Every kernel size is at least 1.
std::vector<Tensor> windows(const Tensor& padded, const Window& w) {
  std::vector<Tensor> r;
  size_t n = w.in.size();
  std::vector<int64_t> off(n, 0);
  for (;;) {
    Tensor s = padded;
    for (size_t i = 0; i < n; ++i) {
      int64_t start = off[i] * w.dilation[i];
      s = slice(s, static_cast<int64_t>(i) + 2, Dim(start), Dim(start + (w.out[i] - 1) * w.stride[i] + 1), w.stride[i]);
    }
    r.push_back(s);
    size_t i = n;
    while (i > 0 && ++off[i - 1] == w.kernel[i - 1]) off[--i] = 0;
    if (i == 0) return r;
  }
}

std::vector<int64_t> spatial(const std::vector<int64_t>& shape) { return {shape.begin() + 2, shape.end()}; }

// [N, C, d..] with static C and d (N may be symbolic: the batch); N is given
// back as 1 in the vector, its dim in *batch.
std::vector<int64_t> image_shape(const Ctx& c, const Tensor& x, const char* why, Dim* batch = nullptr) {
  if (x.rank() < 3) c.fail("the input must be [N, C, d..], got " + x.type().str());
  std::vector<int64_t> s{1};
  for (int64_t i = 1; i < x.rank(); ++i) s.push_back(static_dim(c, x, i, why));
  if (batch) *batch = x.shape()[0];
  return s;
}

// The convolution of x (padded as w says) with weights [M, C/g, k..].
Tensor conv_core(Ctx& c, const Tensor& x, const Tensor& wt, const Window& w, Dim n, int64_t ch, int64_t m, int64_t g) {
  int64_t taps = 1, pos = 1;
  for (int64_t k : w.kernel) taps *= k;
  for (int64_t o : w.out) pos *= o;
  std::vector<Tensor> cols = windows(pad_spatial(c, x, w, 0), w);
  for (Tensor& t : cols) t = unsqueeze(t, {2});
  // [N, C, taps, out..] -> [N, g, C/g * taps, P]; weights [g, M/g, C/g * taps].
  Tensor col = reshape(cols.size() == 1 ? cols[0] : concat(cols, 2), {n, Dim(g), Dim(ch / g * taps), Dim(pos)});
  Tensor wm = reshape(wt, {Dim(g), Dim(m / g), Dim(ch / g * taps)});
  Shape out{n, Dim(m)};
  for (int64_t o : w.out) out.push_back(Dim(o));
  return reshape(matmul(wm, col), out);
}

R conv(Ctx& c) {
  Tensor x = c.in(0), wt = c.in(1);
  Dim n;
  std::vector<int64_t> xs = image_shape(c, x, "Conv of a symbolic channel or spatial dim", &n), ws = static_shape(c, wt, "Conv of symbolic weights");
  if (ws.size() != xs.size()) c.fail("Conv needs [N, C, d..] input and [M, C/group, k..] weights of the same rank");
  int64_t g = c.attr_int("group", 1), ch = xs[1], m = ws[0];
  if (g < 1 || ch % g != 0 || m % g != 0 || ws[1] != ch / g) c.fail("channels " + std::to_string(ch) + " and weights " + shape_str(Shape(ws.begin(), ws.end())) + " do not match group " + std::to_string(g));
  std::vector<int64_t> ks = spatial(ws);
  if (auto k = c.attr_ints("kernel_shape", ks); k != ks) c.fail("kernel_shape differs from the weights'");
  Tensor y = conv_core(c, x, wt, window(c, spatial(xs), ks, false), n, ch, m, g);
  if (c.has_input(2)) y = y + per_channel(c, c.in(2), y.rank());
  return {v(y)};
}

// The transposed convolution as a convolution: the input with stride - 1
// zeros between its elements, padded by span - 1 - pad on each side (plus
// output_padding at the end; negative: cropped), with the weights' spatial
// dims flipped and their channel dims swapped per group.
R conv_transpose(Ctx& c) {
  Tensor x = c.in(0), wt = c.in(1);
  Dim n;
  std::vector<int64_t> xs = image_shape(c, x, "ConvTranspose of a symbolic channel or spatial dim", &n);
  std::vector<int64_t> ws = static_shape(c, wt, "ConvTranspose of symbolic weights");
  if (ws.size() != xs.size()) c.fail("ConvTranspose needs [N, C, d..] input and [C, M/group, k..] weights of the same rank");
  size_t sp = xs.size() - 2;
  int64_t g = c.attr_int("group", 1), ch = xs[1];
  if (g < 1 || ch % g != 0 || ws[0] != ch) c.fail("channels " + std::to_string(ch) + " do not match the weights' " + std::to_string(ws[0]));
  int64_t m = ws[1] * g;
  std::vector<int64_t> ks = spatial(ws);
  check_kernel(c, ks);
  std::vector<int64_t> stride = c.attr_ints("strides", std::vector<int64_t>(sp, 1)), dil = c.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> outpad = c.attr_ints("output_padding", std::vector<int64_t>(sp, 0)), pads = c.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  std::vector<int64_t> out_shape = c.attr_ints("output_shape", {});
  if (stride.size() != sp || dil.size() != sp || outpad.size() != sp || pads.size() != 2 * sp) c.fail("strides, dilations, pads or output_padding do not match the spatial rank");
  check_geometry(c, {&stride, &dil, &outpad, &pads, &out_shape});
  const auto* ap = c.attr("auto_pad");
  std::string auto_pad = ap ? ap->s() : "NOTSET";
  for (size_t i = 0; i < sp; ++i) {
    if (stride[i] < 1 || dil[i] < 1) c.fail("strides and dilations must be positive");
    int64_t span = (ks[i] - 1) * dil[i] + 1, full = stride[i] * (xs[i + 2] - 1) + outpad[i] + span;
    if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t want = !out_shape.empty() ? out_shape.at(out_shape.size() - sp + i) : xs[i + 2] * stride[i];
      int64_t total = full - want;  // negative: zeros appended at the end
      bool upper = auto_pad != "SAME_LOWER";
      pads[i] = total < 0 ? 0 : upper ? total / 2 : total - total / 2;
      pads[i + sp] = total - pads[i];
    } else if (auto_pad == "VALID") {
      pads[i] = pads[i + sp] = 0;
    }
  }
  // Zeros between the elements.
  for (size_t i = 0; i < sp; ++i) {
    int64_t axis = static_cast<int64_t>(i) + 2, len = xs[i + 2], s = stride[i];
    if (s == 1 || len == 0) continue;
    Tensor col = unsqueeze(x, {axis + 1});
    Shape zs = col.shape();
    zs[static_cast<size_t>(axis + 1)] = Dim(s - 1);
    Shape merged = x.shape();
    merged[static_cast<size_t>(axis)] = Dim(len * s);
    x = slice(reshape(concat({col, expand(c.scalar(0, x.dtype()), zs)}, axis + 1), merged), axis, Dim(0), Dim((len - 1) * s + 1));
  }
  // Pad (or crop) to span - 1 - pad each side.
  Window w;
  for (size_t i = 0; i < sp; ++i) {
    int64_t axis = static_cast<int64_t>(i) + 2, span = (ks[i] - 1) * dil[i] + 1;
    int64_t b = span - 1 - pads[i], e = span - 1 - pads[i + sp] + outpad[i];
    int64_t len = (xs[i + 2] - 1) * stride[i] + 1;
    if (b < 0) x = slice(x, axis, Dim(-b), Dim(len)), len += b, b = 0;
    if (e < 0) x = slice(x, axis, Dim(0), Dim(len + e)), len += e, e = 0;
    int64_t out = len + b + e - span + 1;
    if (out < 0) c.fail("the result would have a negative size");
    w.in.push_back(len), w.kernel.push_back(ks[i]), w.stride.push_back(1), w.dilation.push_back(dil[i]);
    w.pad_begin.push_back(b), w.pad_end.push_back(e), w.out.push_back(out);
  }
  // [C, M/g, k..] -> [g, C/g, M/g, k..] -> [g, M/g, C/g, k..] -> [M, C/g, k..], flipped.
  std::vector<int64_t> perm = {0, 2, 1};
  Shape grouped{Dim(g), Dim(ch / g), Dim(m / g)}, back{Dim(m), Dim(ch / g)};
  for (size_t i = 0; i < sp; ++i) perm.push_back(static_cast<int64_t>(i) + 3), grouped.push_back(Dim(ks[i])), back.push_back(Dim(ks[i]));
  Tensor wf = reshape(permute(reshape(wt, grouped), perm), back);
  for (size_t i = 0; i < sp; ++i) wf = reverse_axis(c, wf, static_cast<int64_t>(i) + 2, "ConvTranspose of symbolic weights");
  Tensor y = conv_core(c, x, wf, w, n, ch, m, g);
  if (c.has_input(2)) y = y + per_channel(c, c.in(2), y.rank());
  return {v(y)};
}

std::vector<int64_t> pool_kernel(Ctx& c) {
  std::vector<int64_t> k = c.attr_ints("kernel_shape", {});
  if (k.empty()) c.fail("kernel_shape is required");
  return k;
}

// The maximum of each window; with the Indices output, also where it is:
// the flat index into the input of each window's first maximum (with
// storage_order 1, the spatial dims counted column-major).
R max_pool(Ctx& c) {
  const bool indices = c.node->output_size() > 1 && !c.node->output(1).empty();
  const bool column_major = c.attr_int("storage_order", 0) != 0;
  Tensor x = c.in(0);
  std::vector<int64_t> xs = image_shape(c, x, "MaxPool of a symbolic channel or spatial dim");
  std::vector<int64_t> k = pool_kernel(c);
  if (k.size() + 2 != xs.size()) c.fail("kernel_shape does not match the input's spatial rank");
  Window w = window(c, spatial(xs), k, c.attr_int("ceil_mode", 0) != 0);
  double low = is_float(x.dtype()) ? -INFINITY : int_min(x.dtype());
  std::vector<Tensor> ws = windows(pad_spatial(c, x, w, low), w);
  Tensor r = ws[0];
  for (size_t i = 1; i < ws.size(); ++i) r = maximum(r, ws[i]);
  if (!indices) return {v(r)};
  Dim numel(1);
  for (const Dim& d : x.shape()) numel = numel * d;
  Tensor flat = reshape(iota(x, numel), x.shape());
  if (column_major) {  // counted over the spatial dims reversed, then put back in place
    Shape rev = {x.shape()[0], x.shape()[1]};
    std::vector<int64_t> perm = {0, 1};
    for (int64_t i = x.rank() - 1; i >= 2; --i) rev.push_back(x.shape()[static_cast<size_t>(i)]);
    for (int64_t j = 2; j < x.rank(); ++j) perm.push_back(x.rank() + 1 - j);  // spatial axis j is at rev's rank + 1 - j
    flat = permute(reshape(iota(x, numel), rev), perm);
  }
  std::vector<Tensor> at = windows(pad_spatial(c, flat, w, -1), w);
  Tensor best = ws[0], where_ = at[0];
  for (size_t i = 1; i < ws.size(); ++i) {
    Tensor later = gt(ws[i], best);  // strictly: the first maximum stays
    best = where(later, ws[i], best);
    where_ = where(later, at[i], where_);
  }
  return {v(r), v(where_)};
}

// The mean of each window; without count_include_pad, of its elements that
// are not padding (counted by pooling ones padded with zeros). Padding that
// ceil_mode adds is never counted.
R average_pool(Ctx& c) {
  Tensor x = c.in(0);
  std::vector<int64_t> xs = image_shape(c, x, "AveragePool of a symbolic channel or spatial dim");
  std::vector<int64_t> k = pool_kernel(c);
  if (k.size() + 2 != xs.size()) c.fail("kernel_shape does not match the input's spatial rank");
  bool ceil_mode = c.attr_int("ceil_mode", 0) != 0;
  Window w = window(c, spatial(xs), k, ceil_mode);
  // The sum of each window of t padded (zeros) as `pads` says.
  auto pooled_sum = [&](const Tensor& t, const Window& pads) {
    std::vector<Tensor> ws = windows(pad_spatial(c, t, pads, 0), w);
    Tensor r = ws[0];
    for (size_t i = 1; i < ws.size(); ++i) r = r + ws[i];
    return r;
  };
  Tensor s = pooled_sum(x, w);
  if (c.attr_int("count_include_pad", 0)) {
    // Ones over the input and its declared pads, zeros where ceil_mode's
    // last windows reach beyond them.
    Window declared = window(c, spatial(xs), k, false), extra = w;
    Shape counted(2, Dim(1));
    for (size_t i = 0; i < k.size(); ++i) {
      counted.push_back(Dim(xs[i + 2] + w.pad_begin[i] + declared.pad_end[i]));
      extra.pad_begin[i] = 0;
      extra.pad_end[i] = w.pad_end[i] - declared.pad_end[i];
    }
    return {v(s / pooled_sum(expand(c.scalar(1, x.dtype()), counted), extra))};
  }
  Shape in(2, Dim(1));
  for (int64_t d : spatial(xs)) in.push_back(Dim(d));
  return {v(s / pooled_sum(expand(c.scalar(1, x.dtype()), in), w))};
}

}  // namespace

void add_nn_ops(ConverterTable& t) {
  t.insert({
      {"MatMul", matmul_}, {"Gemm", gemm}, {"Einsum", einsum},
      {"LayerNormalization", layer_norm_}, {"BatchNormalization", batch_norm}, {"InstanceNormalization", instance_norm},
      {"GlobalAveragePool", global_pool<false>}, {"GlobalMaxPool", global_pool<true>},
      {"Conv", conv}, {"ConvTranspose", conv_transpose}, {"MaxPool", max_pool}, {"AveragePool", average_pool},
  });
}

}  // namespace tj::onnx_import
