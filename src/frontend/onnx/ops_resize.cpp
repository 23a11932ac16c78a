// ONNX converters: Resize (opset 10 on) and Upsample. Each resized axis is
// a set of taps: per output index, n input indices (clamped into the axis,
// as the reference's edge padding does) and their weights, from the
// coordinate transformation (half_pixel, half_pixel_symmetric,
// pytorch_half_pixel, align_corners, asymmetric, tf_crop_and_resize) and
// the mode (nearest with its rounding, linear, cubic; antialias when
// downsampling), computed in double as the ONNX reference computes them.
// The graph is then a gather with constant indices per tap and the taps'
// weighted sum (nearest: the one gather), one axis after another, the last
// first; outputs
// that tf_crop_and_resize places outside the input take
// extrapolation_value.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "frontend/onnx/context.h"

namespace tj::onnx_import {

namespace {

enum class Mode { nearest, linear, cubic };

struct Params {
  Mode mode = Mode::nearest;
  std::string coordinates = "half_pixel";  // coordinate_transformation_mode
  std::string rounding = "round_prefer_floor";  // nearest_mode ("simple": Resize-10 and Upsample)
  double cubic_a = -0.75;
  bool exclude_outside = false, antialias = false;
  double extrapolation = 0;
};

// One axis: its sizes, the scale that maps positions, and its crop.
struct Axis {
  int64_t in = 1, out = 1;
  double scale = 1, roi0 = 0, roi1 = 1;
};

// Per output index o, taps [o*n, o*n + n): input indices and weights; and
// whether the output lies outside the input (tf_crop_and_resize).
struct Taps {
  int n = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<bool> outside;
};

std::string str_attr(const Ctx& c, const std::string& name, const std::string& def) {
  const onnx::AttributeProto* a = c.attr(name);
  return a ? a->s() : def;
}

// The weights of a position whose offset past its left neighbour is r
// (1 where the position is an input index), at scale s.
std::vector<double> coefficients(const Params& p, double r, double s) {
  if (p.mode == Mode::nearest) {
    if (r == 1) return {0, 1};
    if (p.rounding == "round_prefer_floor") return {r <= 0.5 ? 1.0 : 0.0, r > 0.5 ? 1.0 : 0.0};
    if (p.rounding == "round_prefer_ceil") return {r < 0.5 ? 1.0 : 0.0, r >= 0.5 ? 1.0 : 0.0};
    if (p.rounding == "floor" || (p.rounding == "simple" && s >= 1)) return {1, 0};
    return {0, 1};  // ceil; "simple" when downsampling
  }
  const double a = p.cubic_a;
  auto normalized = [](std::vector<double> w) {
    double sum = 0;
    for (double x : w) sum += x;
    for (double& x : w) x /= sum;
    return w;
  };
  if (p.mode == Mode::linear) {
    if (!p.antialias) return {1 - r, r};
    const double k = std::min(s, 1.0);
    const int64_t start = static_cast<int64_t>(std::floor(-1 / k) + 1), footprint = 2 - 2 * start;
    std::vector<double> w;
    for (int64_t i = start; i < start + footprint; ++i) w.push_back(std::clamp(1 - std::abs((static_cast<double>(i) - r) * k), 0.0, 1.0));
    return normalized(w);
  }
  if (!p.antialias) {
    const double q = 1 - r;
    return {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a, ((a + 2) * r - (a + 3)) * r * r + 1,
            ((a + 2) * q - (a + 3)) * q * q + 1, ((a * (q + 1) - 5 * a) * (q + 1) + 8 * a) * (q + 1) - 4 * a};
  }
  const double k = std::min(s, 1.0);
  auto cubic = [a](double x) {
    x = std::abs(x);
    if (x <= 1) return (a + 2) * x * x * x - (a + 3) * x * x + 1;
    if (x < 2) return a * x * x * x - 5 * a * x * x + 8 * a * x - 4 * a;
    return 0.0;
  };
  const int64_t start = static_cast<int64_t>(std::floor(-2 / k) + 1), end = 2 - start;
  std::vector<double> w;
  for (int64_t i = start; i < end; ++i) w.push_back(cubic(k * (static_cast<double>(i) - r)));
  return normalized(w);
}

Taps taps_of(const Params& p, const Axis& ax) {
  const double in = static_cast<double>(ax.in), width = ax.scale * in;  // the output's width, unrounded
  Taps t;
  for (int64_t o = 0; o < ax.out; ++o) {
    const double y = static_cast<double>(o);
    double x = 0;
    bool outside = false;
    const std::string& m = p.coordinates;
    if (m == "align_corners") {
      x = width == 1 ? 0 : y * (in - 1) / (width - 1);
    } else if (m == "asymmetric") {
      x = y / ax.scale;
    } else if (m == "tf_crop_and_resize") {
      x = width == 1 ? (ax.roi1 - ax.roi0) * (in - 1) / 2 : y * (ax.roi1 - ax.roi0) * (in - 1) / (width - 1);
      x += ax.roi0 * (in - 1);
      outside = x < 0 || x > in - 1;
    } else if (m == "pytorch_half_pixel") {
      x = width == 1 ? -0.5 : (y + 0.5) / ax.scale - 0.5;
    } else if (m == "half_pixel_symmetric") {
      const double offset = in / 2 * (1 - static_cast<double>(ax.out) / width);
      x = offset + (y + 0.5) / ax.scale - 0.5;
    } else {
      x = (y + 0.5) / ax.scale - 0.5;  // half_pixel
    }
    const double fl = std::floor(x);
    std::vector<double> w = coefficients(p, x == fl ? 1.0 : x - fl, ax.scale);
    const int n = static_cast<int>(w.size());
    if (o == 0) t.n = n;
    // The n inputs nearest x, ties to the left (the reference's edge
    // padding by ceil(n/2) moves every position alike).
    int64_t start = static_cast<int64_t>(fl);
    if (n % 2 == 0) {
      start += x == fl ? -(n / 2) : -(n / 2) + 1;
    } else {
      start += (x - fl <= 0.5 ? 0 : 1) - (n - 1) / 2;
    }
    if (p.exclude_outside) {
      double sum = 0;
      for (int i = 0; i < n; ++i) {
        if (start + i < 0 || start + i >= ax.in) w[static_cast<size_t>(i)] = 0;
        sum += w[static_cast<size_t>(i)];
      }
      if (sum != 0)
        for (double& v : w) v /= sum;
    }
    for (int i = 0; i < n; ++i) {
      t.index.push_back(std::clamp<int64_t>(start + i, 0, ax.in - 1));
      t.weight.push_back(w[static_cast<size_t>(i)]);
    }
    t.outside.push_back(outside);
  }
  return t;
}

// x resized along `axis` by its taps.
Tensor resize_axis(Ctx& c, const Tensor& x, int64_t axis, const Params& p, const Taps& t) {
  const int64_t out = static_cast<int64_t>(t.outside.size());
  auto column = [&](int i) {
    std::vector<int64_t> idx;
    for (int64_t o = 0; o < out; ++o) idx.push_back(t.index[static_cast<size_t>(o * t.n + i)]);
    return idx;
  };
  // A constant along the axis, broadcast over the dims after it.
  Shape along(static_cast<size_t>(x.rank() - axis), Dim(1));
  along[0] = Dim(out);
  auto per_output = [&](std::vector<double> vals, DType dt) { return c.tracer.constant(dt, along, std::move(vals)); };
  Tensor r;
  if (p.mode == Mode::nearest) {
    std::vector<int64_t> idx;
    for (int64_t o = 0; o < out; ++o) {
      int pick = 0;
      for (int i = 0; i < t.n; ++i)
        if (t.weight[static_cast<size_t>(o * t.n + i)] != 0) pick = i;
      idx.push_back(t.index[static_cast<size_t>(o * t.n + pick)]);
    }
    r = take(c, x, axis, idx);
  } else {
    if (!is_float(x.dtype())) c.unsupported("linear and cubic resizing of " + std::string(dtype_name(x.dtype())) + " (floats only)");
    for (int i = 0; i < t.n; ++i) {
      std::vector<double> w;
      bool any = false;
      for (int64_t o = 0; o < out; ++o) w.push_back(t.weight[static_cast<size_t>(o * t.n + i)]), any |= w.back() != 0;
      if (!any) continue;  // a tap every output weighs 0 (integer positions, linear)
      Tensor term = take(c, x, axis, column(i)) * per_output(std::move(w), x.dtype());
      r = r.defined() ? r + term : term;
    }
    if (!r.defined()) r = take(c, x, axis, column(0)) * 0.0;  // every tap weighs 0 everywhere (exclude_outside, every tap outside): zeros, as the reference
  }
  if (std::find(t.outside.begin(), t.outside.end(), true) != t.outside.end()) {
    std::vector<double> m;
    for (bool b : t.outside) m.push_back(b ? 1 : 0);
    r = where(per_output(std::move(m), DType::boolean), p.extrapolation, r);
  }
  return r;
}

// Resize of x to the sizes, or by the scales, given per axis of `axes`.
Tensor resize(Ctx& c, const Tensor& x, const Params& p, const std::vector<int64_t>& axes, const std::vector<double>& scales,
              const std::vector<Dim>& sizes, const std::vector<double>& roi, const std::string& keep_aspect) {
  const size_t k = axes.size();
  std::vector<Axis> ax(k);
  for (size_t i = 0; i < k; ++i) {
    // A dim kept as it is (batch, channels: scale 1, or the size the input
    // has, symbolic or not, a model's sizes computed from its own shape)
    // may be symbolic: it is not resized.
    const bool unit = sizes.empty() ? scales[i] == 1 : keep_aspect == "stretch" && sizes[i] == x.shape()[static_cast<size_t>(axes[i])];
    if (unit && (roi.empty() || (roi[i] == 0 && roi[k + i] == 1))) {
      ax[i].in = ax[i].out = -1;
      continue;
    }
    ax[i].in = static_dim(c, x, axes[i], "Resize of a symbolic dim");
    if (!roi.empty()) ax[i].roi0 = roi[i], ax[i].roi1 = roi[k + i];
  }
  if (!sizes.empty()) {
    for (size_t i = 0; i < k; ++i) {
      if (ax[i].in < 0) continue;
      if (!sizes[i].is_const()) c.unsupported("sizes: a symbolic size (" + sizes[i].str() + ") for dim " + std::to_string(axes[i]) + " of " + x.type().str());
      const int64_t o = sizes[i].value();
      if (o < 1) c.fail("sizes must be positive, got " + std::to_string(o));
      ax[i].scale = static_cast<double>(o) / static_cast<double>(ax[i].in), ax[i].out = o;
    }
    if (keep_aspect != "stretch") {
      if (keep_aspect != "not_larger" && keep_aspect != "not_smaller") c.fail("keep_aspect_ratio_policy must be stretch, not_larger or not_smaller");
      double s = ax[0].scale;
      for (const Axis& a : ax) s = keep_aspect == "not_larger" ? std::min(s, a.scale) : std::max(s, a.scale);
      for (Axis& a : ax) a.scale = s, a.out = static_cast<int64_t>(s * static_cast<double>(a.in) + 0.5);
    }
  } else {
    for (size_t i = 0; i < k; ++i) {
      if (!(scales[i] > 0) || !std::isfinite(scales[i])) c.fail("scales must be positive, got " + std::to_string(scales[i]));
      if (ax[i].in < 0) continue;
      ax[i].scale = scales[i];
      const double o = scales[i] * static_cast<double>(ax[i].in);
      if (o >= static_cast<double>(int64_t{1} << 31)) c.fail("an output dim of " + std::to_string(o) + " is out of range");
      ax[i].out = static_cast<int64_t>(o);
      if (ax[i].out < 1) c.fail("scale " + std::to_string(scales[i]) + " leaves dim " + std::to_string(axes[i]) + " empty");
    }
  }
  // The last axis first, as the reference's interpolate_nd recursion sums
  // them; the outer axes' gathers then read whole rows of what the inner
  // ones made (a 14x14 -> 224x224 bilinear upsample over 21 channels: 338 ->
  // 64 us, the last axis's gathers no longer at full size).
  std::vector<size_t> order(k);
  for (size_t i = 0; i < k; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return axes[a] > axes[b]; });
  Tensor r = x;
  for (size_t i : order) {
    const Axis& a = ax[i];
    if (a.in < 0 || (a.scale == 1 && a.out == a.in && a.roi0 == 0 && a.roi1 == 1)) continue;
    if (a.out > (int64_t{1} << 24)) c.fail("an output dim of " + std::to_string(a.out) + " is out of range");
    r = resize_axis(c, r, axes[i], p, taps_of(p, a));
  }
  return r;
}

R resize_op(Ctx& c) {
  Tensor x = c.in(0);
  Params p;
  const std::string mode = str_attr(c, "mode", "nearest");
  if (mode == "nearest") p.mode = Mode::nearest;
  else if (mode == "linear" || mode == "bilinear") p.mode = Mode::linear;
  else if (mode == "cubic" && c.opset >= 11) p.mode = Mode::cubic;
  else c.fail("mode must be nearest, linear or cubic, got '" + mode + "'");
  std::vector<double> scales, roi;
  std::vector<Dim> sizes;
  std::vector<int64_t> axes;
  std::string keep_aspect = "stretch";
  const bool legacy = c.node->op_type() == "Upsample" || c.opset < 11;  // Resize-10, Upsample: positions x / scale
  if (legacy) {
    p.coordinates = "asymmetric", p.rounding = "simple";
    if (c.node->op_type() == "Upsample" && c.opset < 9) {
      const onnx::AttributeProto* s = c.attr("scales");
      if (!s) c.fail("scales is required");
      scales.assign(s->floats().begin(), s->floats().end());
    } else {
      scales = c.known(1, "scales").to_vector();
    }
  } else {
    p.coordinates = str_attr(c, "coordinate_transformation_mode", "half_pixel");
    static const char* kModes[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"};
    if (std::find(std::begin(kModes), std::end(kModes), p.coordinates) == std::end(kModes))
      c.fail("unknown coordinate_transformation_mode '" + p.coordinates + "'");
    p.rounding = str_attr(c, "nearest_mode", "round_prefer_floor");
    if (p.rounding != "round_prefer_floor" && p.rounding != "round_prefer_ceil" && p.rounding != "floor" && p.rounding != "ceil")
      c.fail("unknown nearest_mode '" + p.rounding + "'");
    p.cubic_a = c.attr_float("cubic_coeff_a", -0.75);
    p.exclude_outside = c.attr_int("exclude_outside", 0) != 0;
    p.extrapolation = c.attr_float("extrapolation_value", 0.0);
    p.antialias = c.attr_int("antialias", 0) != 0;
    if (p.antialias && p.mode == Mode::nearest) c.fail("antialias applies to linear and cubic resizing, not nearest");
    keep_aspect = str_attr(c, "keep_aspect_ratio_policy", "stretch");
    c.require_known(p.coordinates == "tf_crop_and_resize" ? std::vector<size_t>{1, 2, 3} : std::vector<size_t>{2, 3}, "roi, scales and sizes");
    if (c.has_input(2) && c.known(2, "scales").numel() > 0) scales = c.known(2, "scales").to_vector();
    if (c.has_input(3)) sizes = c.known_dims(3, "sizes");  // dims: a size may be a symbolic dim of the input
    if (scales.empty() == sizes.empty()) c.fail("exactly one of scales and sizes must be given");
    if (p.coordinates == "tf_crop_and_resize") {
      if (!c.has_input(1)) c.fail("tf_crop_and_resize needs roi");
      roi = c.known(1, "roi").to_vector();
    }
  }
  const int64_t rank = x.rank();
  axes = c.attr_ints("axes", {});
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  } else {
    for (int64_t& a : axes) a = axis_of(c, a, rank);
    std::vector<int64_t> sorted = axes;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) c.fail("axes repeat an axis");
  }
  const size_t k = axes.size(), given = sizes.empty() ? scales.size() : sizes.size();
  if (given != k) c.fail((sizes.empty() ? "scales" : "sizes") + std::string(" has ") + std::to_string(given) + " values for " + std::to_string(k) + " axes");
  if (!roi.empty() && roi.size() != 2 * k) c.fail("roi has " + std::to_string(roi.size()) + " values for " + std::to_string(k) + " axes");
  return {v(resize(c, x, p, axes, scales, sizes, roi, keep_aspect))};
}

}  // namespace

void add_resize_ops(ConverterTable& t) { t.insert({{"Resize", resize_op}, {"Upsample", resize_op}}); }

}  // namespace tj::onnx_import
