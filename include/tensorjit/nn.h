// Model authoring on top of tensorjit/tensor.h: the layers PyTorch code
// reads as one call, and weights looked up by name in a tree of prefixes.
//
//   tj::SafetensorsFile weights("model.safetensors");
//   tj::ParamTree p(tracer, weights);
//   for (int l = 0; l < 6; ++l) {
//     tj::ParamTree layer = p.sub("encoder.layer." + std::to_string(l));
//     x = tj::linear(x, layer["attention.output.dense.weight"], layer["attention.output.dense.bias"]);
//   }
#pragma once

#include <functional>
#include <string>

#include "tensorjit/ndarray.h"
#include "tensorjit/tensor.h"

namespace tj {

class JitArgs;          // tensorjit/jit.h
class SafetensorsFile;  // tensorjit/safetensors.h

// x @ w (+ b), w as [in, out] (torch.nn.Linear's weight transposed).
Tensor linear(const Tensor& x, const Tensor& w);
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);
// x / max(||x||_2 along `axis`, eps) (torch.nn.functional.normalize).
Tensor normalize(const Tensor& x, int64_t axis = -1, double eps = 1e-12);

// ---- composite layers -------------------------------------------------------
// Written once over the IR's ops and called by every frontend: the ONNX
// converters, the torch backend's aten rows (Python) and C++ code. They
// throw tj::ShapeError for operands that do not fit, and
// tj::UnsupportedOperand for valid ones they cannot lower (a symbolic dim
// where a static one is needed). An undefined Tensor (Tensor()) is an absent
// optional operand. Lists given per spatial dim may be empty: the default.

// Convolution over [N, C, d1, .., dk] (k >= 1; or [C, d..], unbatched) with
// weights [M, C/groups, k1, .., kk]; bias [M] or absent.
struct ConvOptions {
  std::vector<int64_t> stride, dilation;  // default 1
  std::vector<int64_t> pad_begin, pad_end;  // default 0
  int64_t groups = 1;
};
Tensor conv(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvOptions& o = {});
// The gradient of conv's weights [M, C/groups, kernel..] given its input x
// [N, C, d..] and the gradient of its output [N, M, o..].
Tensor conv_weight_grad(const Tensor& x, const Tensor& grad, const std::vector<int64_t>& kernel, const ConvOptions& o = {});
// im2col's adjoint: input [N, C * taps, L] (column l is the window at output
// position l, its rows channel-major over the kernel's offsets) summed back
// into [N, C, image..] (torch's col2im, ONNX Col2Im).
Tensor col2im(const Tensor& cols, const std::vector<int64_t>& image, const std::vector<int64_t>& kernel, const ConvOptions& o = {});
// The transposed convolution (gradient of conv with respect to its input):
// weights [C, M/groups, k..]; each output dim is
// (d - 1) * stride - pad_begin - pad_end + dilation * (k - 1) + 1 + output_padding.
struct ConvTransposeOptions : ConvOptions {
  std::vector<int64_t> output_padding;  // default 0
};
Tensor conv_transpose(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvTransposeOptions& o = {});

// Pooling windows over the last k dims of x, k = kernel.size(); the dims
// before them (at least one: [N, C, d..] or [C, d..]) are pooled alike.
struct PoolOptions {
  std::vector<int64_t> kernel;
  std::vector<int64_t> stride, dilation;  // default 1 (torch's default stride, the kernel, is the caller's)
  std::vector<int64_t> pad_begin, pad_end;  // default 0
  bool ceil_mode = false;  // windows that start inside the input or its begin pad count
};
Tensor max_pool(const Tensor& x, const PoolOptions& o);
struct ValuesAndIndices {
  Tensor values, indices;
};
// And where each maximum is (the first one): its flat index (i64) within its
// [d1, .., dk] plane, row-major (torch), or column-major (ONNX's storage_order 1).
ValuesAndIndices max_pool_with_indices(const Tensor& x, const PoolOptions& o, bool column_major = false);
// The mean of each window: with count_include_pad, over the window's
// positions in the input and its declared pads (not the room ceil_mode
// adds), else over its positions in the input; a `divisor` other than 0
// divides every window by that instead (torch's divisor_override).
Tensor avg_pool(const Tensor& x, const PoolOptions& o, bool count_include_pad, int64_t divisor = 0);
// The gradient of avg_pool's input x given its output's.
Tensor avg_pool_grad(const Tensor& grad, const Tensor& x, const PoolOptions& o, bool count_include_pad, int64_t divisor = 0);
// Adaptive pooling to `out` sizes of the spatial dims (torch): output i of
// a dim of n reads [floor(i n / out), ceil((i + 1) n / out)).
Tensor adaptive_avg_pool(const Tensor& x, const std::vector<int64_t>& out);
ValuesAndIndices adaptive_max_pool(const Tensor& x, const std::vector<int64_t>& out);
Tensor adaptive_avg_pool_grad(const Tensor& grad, const Tensor& x, const std::vector<int64_t>& out);

// Normalization. mean and rstd (1 / sqrt(var + eps), population variance)
// keep the reduced dims as 1 unless stated.
struct Normalized {
  Tensor y, mean, var, rstd;
};
// Over the dims from `first_axis` to the end; w and b of those dims' shape (or absent).
Normalized layer_norm(const Tensor& x, int64_t first_axis, const Tensor& w, const Tensor& b, double eps);
// With given statistics (inference): per channel (dim 1) vectors [C].
Tensor batch_norm(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& mean, const Tensor& var, double eps);
// With the batch's statistics (training): over every dim but 1; mean, var
// and rstd are vectors [C].
Normalized batch_norm_train(const Tensor& x, const Tensor& w, const Tensor& b, double eps);
// x [N, C, ..] in `groups` groups of channels; w, b [C]; mean and rstd [N, groups].
Normalized group_norm(const Tensor& x, int64_t groups, const Tensor& w, const Tensor& b, double eps);

// ---- attention ----------------------------------------------------------------
// softmax(q k^T scale + bias) v with q [B, Hq, T, D], k [B, Hkv, S, D], v [B,
// Hkv, S, Dv] (Hq a multiple of Hkv: query head h reads KV head h / (Hq /
// Hkv)); one fused op (flash attention).
struct AttentionOptions {
  double scale = 0;  // 0: 1 / sqrt(D)
  // Key j visible to query i iff j <= i + causal_offset (torch's is_causal: offset 0).
  bool causal = false;
  int64_t causal_offset = 0;
  // Additive bias, or a bool mask (true: visible), of rank <= 4 broadcasting to [B, Hq, T, S].
  Tensor bias;
  bool zero_empty_rows = false;  // a row that sees no key: 0, not NaN
};
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o = {});
// Each row's log sum_j exp(s_ij) [B, Hq, T] (-inf for a row that sees no key).
Tensor attention_lse(const Tensor& q, const Tensor& k, const AttentionOptions& o = {});
// The gradients of attention's q, k and v given its output `out`, the
// output's gradient `dout` and lse (attention_lse's).
struct AttentionGrads {
  Tensor dq, dk, dv;
};
AttentionGrads attention_grad(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& dout, const Tensor& lse,
                              const AttentionOptions& o = {});

// ---- data movement -----------------------------------------------------------
enum class PadMode { constant, reflect, edge, wrap };
// begin[i] and end[i] elements around axis i (lists as long as the rank, or
// shorter: the leading axes); negative ones crop. constant: `fill` (a
// scalar of x's dtype; absent: 0); reflect: mirrored without the edge;
// edge: the edge repeated; wrap: circular.
Tensor pad(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& end, PadMode mode = PadMode::constant,
           const Tensor& fill = Tensor());
Tensor flip(const Tensor& x, const std::vector<int64_t>& axes);
// Elements shifted by shifts[i] along axes[i], wrapping around.
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& axes);
// out[.., i, ..] = x[.., idx[.., i, ..], ..] along `axis` (torch.gather, ONNX
// GatherElements): idx has x's rank; negative indices count from the end.
Tensor take_along(const Tensor& x, const Tensor& idx, int64_t axis);
// x with src's elements written where idx (of src's shape, x's rank) says
// along `axis` (torch.scatter, ONNX ScatterElements); with `add` summed
// into x instead. Without add, an element written twice takes one of the
// writes (which one is unspecified, as torch says).
Tensor scatter(const Tensor& x, const Tensor& idx, const Tensor& src, int64_t axis, bool add = false);
// The lower (upper) triangle of the last two dims from diagonal k; 0 elsewhere.
Tensor tril(const Tensor& x, int64_t k = 0);
Tensor triu(const Tensor& x, int64_t k = 0);

// ---- scans and sorting ---------------------------------------------------------
// Along `axis`; exclusive: without the element itself; reverse: from the end.
Tensor cumsum(const Tensor& x, int64_t axis, bool exclusive = false, bool reverse = false);
Tensor cumprod(const Tensor& x, int64_t axis);
// Stable: equal elements keep their order; NaN sorts above everything.
ValuesAndIndices sort(const Tensor& x, int64_t axis = -1, bool descending = false);
// The k largest (smallest) along `axis`, sorted, ties to the lower index.
ValuesAndIndices topk(const Tensor& x, int64_t k, int64_t axis = -1, bool largest = true);

// ---- resizing ---------------------------------------------------------------
// The spatial dims of [N, C, d..] resized to `out`. `scales` (per spatial
// dim, optional) is what maps positions when given, as torch's
// scale_factor does (else in / out).
// Nearest: source index floor(i * in / out) (torch's "nearest").
Tensor upsample_nearest(const Tensor& x, const std::vector<int64_t>& out, const std::vector<double>& scales = {});
// Linear in each spatial dim (bilinear for 2): align_corners maps the
// corner pixels' centres onto each other, else half-pixel centres (torch).
Tensor upsample_linear(const Tensor& x, const std::vector<int64_t>& out, bool align_corners, const std::vector<double>& scales = {});

// A model's weights as a tree of names. p["wq"] is the param prefix + "wq",
// declared on first use with the dtype and shape the weights have (and the
// same tensor after that); p.sub("layers.0") is the subtree "layers.0.". The
// weights (a file or a map) must outlive the tracing. From JitArgs the params
// are held by the compiled entry, as JitArgs::param.
class ParamTree {
 public:
  ParamTree(Tracer& t, const SafetensorsFile& weights, std::string prefix = "");
  ParamTree(Tracer& t, const Bindings& weights, std::string prefix = "");
  ParamTree(JitArgs& a, const SafetensorsFile& weights, std::string prefix = "");
  ParamTree(JitArgs& a, const Bindings& weights, std::string prefix = "");

  ParamTree sub(const std::string& name) const;
  // Throws tj::Error naming the full name when the weights have no such tensor.
  Tensor operator[](const std::string& name) const;
  bool has(const std::string& name) const;
  const std::string& prefix() const { return prefix_; }

 private:
  using Declare = std::function<Tensor(const std::string& full_name)>;
  using Has = std::function<bool(const std::string& full_name)>;
  ParamTree(Declare d, Has h, std::string prefix) : declare_(std::move(d)), has_(std::move(h)), prefix_(std::move(prefix)) {}
  [[noreturn]] static void missing(const std::string& full_name);
  Declare declare_;
  Has has_;
  std::string prefix_;
};

}  // namespace tj
