// ONNX converters: constants, shapes, views and data movement. Operands
// that are shapes, axes, sizes or pads must be known at import (constants,
// initializers, or shape arithmetic evaluated there), as in ONNX Runtime's
// and TVM's importers; they become static or symbolic dims of the IR.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "frontend/onnx/context.h"
#include "frontend/onnx/import.h"

namespace tj::onnx_import {

namespace {

R constant(Ctx& c) {
  const auto* a = c.attr("value");
  NDArray value;
  if (a && a->has_t()) value = tensor_value(a->t(), "Constant", c.base_dir);
  else if (const auto* f = c.attr("value_float")) value = NDArray::of<float>({}, std::vector<float>{f->f()});
  else if (const auto* i = c.attr("value_int")) value = NDArray::of<int64_t>({}, std::vector<int64_t>{i->i()});
  else if (const auto* fs = c.attr("value_floats")) value = NDArray::of<float>({fs->floats_size()}, std::vector<float>(fs->floats().begin(), fs->floats().end()));
  else if (const auto* is = c.attr("value_ints")) value = NDArray::of<int64_t>({is->ints_size()}, std::vector<int64_t>(is->ints().begin(), is->ints().end()));
  else if (c.attr("sparse_value") || c.attr("value_string") || c.attr("value_strings")) c.unsupported("sparse and string constants are not supported");
  else c.fail("a Constant needs value, value_float(s) or value_int(s)");
  return {known_value(c, std::move(value))};
}

// The shape (dims, symbolic ones included: sym_shapes.cpp).
R shape(Ctx& c) {
  const Shape& dims = c.in(0).shape();
  int64_t r = static_cast<int64_t>(dims.size());
  int64_t start = c.attr_int("start", 0), end = c.attr_int("end", r);
  start = std::clamp<int64_t>(start < 0 ? start + r : start, 0, r);
  end = std::clamp<int64_t>(end < 0 ? end + r : end, 0, r);
  return {dims_value(c, std::vector<Dim>(dims.begin() + start, dims.begin() + std::max(start, end)), false)};
}

R size(Ctx& c) {
  return {dims_value(c, {numel(c.in(0).shape())}, true)};
}

// `value` (one element, default f32 0) in the shape operand's shape.
R constant_of_shape(Ctx& c) {
  std::vector<Dim> to = c.known_dims(0, "the shape");
  NDArray value = NDArray::of<float>({}, std::vector<float>{0.f});
  if (const auto* a = c.attr("value"); a && a->has_t()) value = tensor_value(a->t(), "ConstantOfShape value", c.base_dir);
  if (value.numel() != 1) c.fail("value must have one element");
  for (const Dim& d : to)
    if (auto k = d.as_const(); k && *k < 0) c.fail("negative dim " + std::to_string(*k));
  NDArray one(value.dtype(), {});
  std::memcpy(one.raw(), value.raw(), one.nbytes());
  return {v(expand(c.tracer.constant(one), Shape(to.begin(), to.end())))};
}

R identity(Ctx& c) { return {c.input(0)}; }

// Inference: the input unchanged; the mask (when asked for) all true.
R dropout(Ctx& c) {
  if (c.has_input(2)) {
    if (c.known(2, "training_mode").get(0) != 0) {
      double ratio = c.has_input(1) ? c.known(1, "the ratio").get(0) : 0.5;
      if (ratio != 0) c.unsupported("Dropout in training mode (random) is not supported");
    }
  }
  Tensor x = c.in(0);
  R r{c.input(0)};
  if (c.node->output_size() > 1) r.push_back(v(expand(c.tracer.scalar(1, DType::boolean), x.shape())));
  return r;
}

// saturate applies to float8 targets; e8m0 rounds up (the default
// round_mode) and saturates, its other modes are not supported.
Tensor cast_to(Ctx& c, const Tensor& x, DType to) {
  const bool saturate = c.attr_int("saturate", 1) != 0;
  const auto* mode = c.attr("round_mode");
  if (to == DType::f8e8m0 && ((mode && mode->s() != "up") || !saturate))
    c.unsupported("a cast to float8e8m0 that does not round up and saturate");
  return cast(x, to, saturate);
}

R cast_(Ctx& c) {
  return {v(cast_to(c, c.in(0), dtype_of_onnx(static_cast<int32_t>(c.attr_int("to", 0)), "Cast")))};
}
R cast_like(Ctx& c) { return {v(cast_to(c, c.in(0), c.in(1).dtype()))}; }

R transpose_(Ctx& c) {
  Tensor x = c.in(0);
  std::vector<int64_t> rev;
  for (int64_t i = x.rank() - 1; i >= 0; --i) rev.push_back(i);
  return {v(permute(x, c.attr_ints("perm", rev)))};
}

// 0 copies the input's dim (unless allowzero), -1 is inferred.
R reshape_(Ctx& c) {
  Tensor x = c.in(0);
  std::vector<Dim> to = c.known_dims(1, "the shape");
  bool allowzero = c.attr_int("allowzero", 0) != 0;
  Shape s;
  for (size_t i = 0; i < to.size(); ++i) {
    auto k = to[i].as_const();
    if (k && *k == 0 && !allowzero) {
      if (static_cast<int64_t>(i) >= x.rank()) c.fail("shape entry " + std::to_string(i) + " is 0 but the input has rank " + std::to_string(x.rank()));
      s.push_back(x.shape()[i]);
    } else {
      if (k && *k < -1) c.fail("shape entry " + std::to_string(*k));
      s.push_back(to[i]);
    }
  }
  return {v(reshape(x, s))};
}

R flatten(Ctx& c) {
  Tensor x = c.in(0);
  int64_t axis = c.attr_int("axis", 1);
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis > x.rank()) c.fail("axis out of range");
  Dim outer(1), inner(1);
  for (int64_t i = 0; i < x.rank(); ++i) (i < axis ? outer : inner) = (i < axis ? outer : inner) * x.shape()[static_cast<size_t>(i)];
  return {v(reshape(x, {outer, inner}))};
}

R unsqueeze_(Ctx& c) {
  if (!c.has_input(1)) c.fail("Unsqueeze needs axes");
  return {v(unsqueeze(c.in(0), c.known_ints(1, "the axes")))};
}

R squeeze_(Ctx& c) {
  Tensor x = c.in(0);
  std::vector<int64_t> axes = c.has_input(1) ? c.known_ints(1, "the axes") : std::vector<int64_t>{};
  if (axes.empty())
    for (int64_t i = 0; i < x.rank(); ++i)
      if (x.shape()[static_cast<size_t>(i)] == Dim(1)) axes.push_back(i);
  return {v(squeeze(x, axes))};
}

// Bidirectional broadcast of the input and the shape operand.
R expand_(Ctx& c) {
  Tensor x = c.in(0);
  std::vector<Dim> to = c.known_dims(1, "the shape");
  size_t r = std::max(to.size(), static_cast<size_t>(x.rank()));
  Shape out(r, Dim(1));
  for (size_t i = 0; i < r; ++i) {
    size_t from_end = r - 1 - i;
    Dim xd = from_end < static_cast<size_t>(x.rank()) ? x.shape()[static_cast<size_t>(x.rank()) - 1 - from_end] : Dim(1);
    Dim td = from_end < to.size() ? to[to.size() - 1 - from_end] : Dim(1);
    out[i] = td == Dim(1) ? xd : td;
  }
  return {v(expand(x, out))};
}

R concat_(Ctx& c) {
  std::vector<Tensor> xs;
  for (int i = 0; i < c.node->input_size(); ++i)
    if (c.has_input(static_cast<size_t>(i))) xs.push_back(c.in(static_cast<size_t>(i)));
  return {v(concat(xs, c.attr_int("axis", 0)))};
}

// Sizes from the split operand, or num_outputs (opset 18) parts of
// ceil(dim / n) (the last smaller), or as many equal parts as outputs.
R split_(Ctx& c) {
  Tensor x = c.in(0);
  int64_t axis = axis_of(c, c.attr_int("axis", 0), x.rank());
  int64_t n = static_dim(c, x, axis, "Split of a symbolic dim");
  int64_t parts = c.node->output_size();
  std::vector<int64_t> sizes;
  if (c.has_input(1)) {
    sizes = c.known_ints(1, "the split sizes");
  } else {
    int64_t k = c.attr_int("num_outputs", parts);
    int64_t each = c.attr("num_outputs") ? (n + k - 1) / std::max<int64_t>(k, 1) : (k > 0 && n % k == 0 ? n / k : -1);
    if (each < 0) c.fail("dim " + std::to_string(n) + " does not split into " + std::to_string(k) + " equal parts");
    for (int64_t i = 0, left = n; i < k; ++i, left -= each) sizes.push_back(std::min(each, std::max<int64_t>(left, 0)));
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) c.fail("negative split size");
    total += s;
  }
  if (total != n || static_cast<int64_t>(sizes.size()) != parts)
    c.fail(std::to_string(sizes.size()) + " parts summing to " + std::to_string(total) + " for " + std::to_string(parts) + " outputs of a dim of " +
           std::to_string(n));
  R r;
  int64_t at = 0;
  for (int64_t s : sizes) {
    r.push_back(v(slice(x, axis, Dim(at), Dim(at + s))));
    at += s;
  }
  return r;
}

R slice_(Ctx& c) {
  Tensor x = c.in(0);
  std::vector<int64_t> starts = c.known_ints(1, "the starts"), ends;
  std::vector<Dim> end_dims = c.known_dims(2, "the ends");
  for (const Dim& e : end_dims) ends.push_back(e.as_const().value_or(std::numeric_limits<int64_t>::min()));
  std::vector<int64_t> axes, steps;
  if (c.has_input(3)) axes = c.known_ints(3, "the axes");
  else
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  steps = c.has_input(4) ? c.known_ints(4, "the steps") : std::vector<int64_t>(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.fail("starts, ends, axes and steps differ in length");
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t axis = axis_of(c, axes[k], x.rank()), step = steps[k];
    if (step == 0) c.fail("step 0");
    Dim d = x.shape()[static_cast<size_t>(axis)];
    if (!end_dims[k].as_const()) {  // a symbolic end: x[start:end] (it must be within the dim)
      if (step != 1 || starts[k] < 0) c.unsupported("Slice to a symbolic end other than [start:end] with start >= 0");
      x = slice(x, axis, Dim(starts[k]), end_dims[k]);
      continue;
    }
    auto n = d.as_const();
    if (!n) {  // a symbolic dim: forward ranges that stay within it
      int64_t e = ends[k];
      if (step != 1 || starts[k] < 0 || e < 0) c.unsupported("Slice of a symbolic dim other than [start:end] with start, end >= 0");
      x = slice(x, axis, Dim(starts[k]), e >= std::numeric_limits<int32_t>::max() ? d : Dim(e));
      continue;
    }
    int64_t s = starts[k], e = ends[k];
    s = s < 0 ? std::max<int64_t>(s, -*n) + *n : s;  // no overflow for INT64_MIN
    e = e < 0 ? std::max<int64_t>(e, -*n - 1) + *n : e;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, *n), e = std::clamp<int64_t>(e, 0, *n);
      x = slice(x, axis, Dim(s), Dim(std::max(s, e)), step);
    } else {
      s = std::clamp<int64_t>(s, 0, *n - 1), e = std::clamp<int64_t>(e, -1, *n - 1);
      std::vector<int64_t> idx;
      for (int64_t i = s; i > e; i += step) idx.push_back(i);
      x = take(c, x, axis, idx);
    }
  }
  return {v(x)};
}

// Negative indices count from the end; known ones are normalized here,
// others in the graph (an axis of static size).
R gather_(Ctx& c) {
  Tensor x = c.in(0);
  int64_t axis = axis_of(c, c.attr_int("axis", 0), x.rank());
  const Value& iv = c.input(1);
  Tensor idx = iv.t;
  auto n = x.shape()[static_cast<size_t>(axis)].as_const();
  if (n && iv.known && is_int(iv.known->dtype())) {
    NDArray k(DType::i64, iv.known->shape());
    for (int64_t i = 0; i < k.numel(); ++i) {
      int64_t j = iv.known->dtype() == DType::i64 ? iv.known->data<int64_t>()[i] : iv.known->data<int32_t>()[i];
      if (j < -*n || j >= *n) c.fail("index " + std::to_string(j) + " out of range for a dim of " + std::to_string(*n));
      k.data<int64_t>()[i] = j < 0 ? j + *n : j;
    }
    idx = c.tracer.constant(k);
  } else if (n) {
    idx = where(idx < 0.0, idx + static_cast<double>(*n), idx);
  }
  return {v(gather(x, idx, axis))};
}

R gather_elements(Ctx& c) {
  Tensor x = c.in(0);
  return {v(take_along(x, c.in(1), axis_of(c, c.attr_int("axis", 0), x.rank())))};
}

// data[i[..., 0], .., i[..., k-1], ...] for each index tuple of the last
// axis: a gather from data with its first k dims merged, at the tuples' flat
// positions. The first batch_dims dims of data and indices are shared: each
// tuple addresses its own batch element's data (the batch dims merged too,
// the element's offset added).
R gather_nd(Ctx& c) {
  Tensor x = c.in(0), idx = cast(c.in(1), DType::i64);
  int64_t b = c.attr_int("batch_dims", 0);
  if (idx.rank() < 1) c.fail("the indices need rank 1 or more");
  if (b < 0 || b >= std::min(x.rank(), idx.rank())) c.fail("batch_dims " + std::to_string(b) + " out of range");
  int64_t k = static_dim(c, idx, idx.rank() - 1, "GatherND with a symbolic index length");
  if (k < 1 || b + k > x.rank()) c.fail("index tuples of " + std::to_string(k) + " for data of rank " + std::to_string(x.rank()));
  int64_t batches = 1;
  for (int64_t d = 0; d < b; ++d) {
    int64_t n = static_dim(c, x, d, "GatherND over a symbolic batch dim");
    if (static_dim(c, idx, d, "GatherND over a symbolic batch dim") != n) c.fail("data and indices differ in batch dim " + std::to_string(d));
    batches *= n;
  }
  std::vector<int64_t> dims, strides(static_cast<size_t>(k));
  for (int64_t d = 0; d < k; ++d) dims.push_back(static_dim(c, x, b + d, "GatherND over a symbolic dim"));
  int64_t stride = 1;
  for (int64_t d = k - 1; d >= 0; --d) strides[static_cast<size_t>(d)] = stride, stride *= dims[static_cast<size_t>(d)];
  Tensor dv = c.tracer.constant(NDArray::of<int64_t>({k}, dims)), sv = c.tracer.constant(NDArray::of<int64_t>({k}, strides));
  Tensor norm = where(idx < 0.0, idx + dv, idx);
  Tensor flat = sum(norm * sv, {idx.rank() - 1});  // [B..., M...]
  if (b > 0) {
    // + (the flat batch element) * (its data's element count), broadcast
    // over the index dims.
    Shape at;
    for (int64_t d = 0; d < b; ++d) at.push_back(idx.shape()[static_cast<size_t>(d)]);
    for (int64_t d = b; d + 1 < idx.rank(); ++d) at.push_back(Dim(1));
    flat = flat + reshape(iota(x, Dim(batches)), at) * static_cast<double>(stride);
  }
  Shape merged{Dim(batches * stride)};
  for (int64_t d = b + k; d < x.rank(); ++d) merged.push_back(x.shape()[static_cast<size_t>(d)]);
  return {v(gather(reshape(x, merged), flat, 0))};
}

// Scatters with known indices: per data element, the updates that write it
// (in order), computed here; the result selects (or combines) gathered
// updates where there are any.
Tensor scatter(Ctx& c, const Tensor& data, const Tensor& updates, const std::vector<std::vector<int64_t>>& writers) {
  const auto* r = c.attr("reduction");
  std::string red = r ? r->s() : "none";
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min") c.fail("unknown reduction '" + red + "'");
  size_t layers = 0;
  for (const auto& w : writers) layers = std::max(layers, red == "none" ? std::min<size_t>(w.size(), 1) : w.size());
  Tensor flat_updates = reshape(updates, {Dim(-1)}), out = data;
  int64_t n = static_cast<int64_t>(writers.size());
  for (size_t l = 0; l < layers; ++l) {
    NDArray at(DType::i64, {n}), has(DType::boolean, {n});
    for (int64_t p = 0; p < n; ++p) {
      const auto& w = writers[static_cast<size_t>(p)];
      bool any = red == "none" ? !w.empty() && l == 0 : l < w.size();
      has.data<uint8_t>()[p] = any;
      at.data<int64_t>()[p] = any ? (red == "none" ? w.back() : w[l]) : 0;  // none: the last write wins
    }
    Tensor u = reshape(gather(flat_updates, c.tracer.constant(at), 0), data.shape());
    Tensor mask = reshape(c.tracer.constant(has), data.shape());
    Tensor merged = red == "none" ? u : red == "add" ? out + u : red == "mul" ? out * u : red == "max" ? maximum(out, u) : minimum(out, u);
    out = where(mask, merged, out);
  }
  return out;
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

constexpr int64_t kMaxScatter = 1 << 20;  // data elements of a scatter computed at import

R scatter_nd(Ctx& c) {
  Tensor data = c.in(0), updates = c.in(2);
  std::vector<int64_t> ds = static_shape(c, data, "ScatterND of a symbolic shape");
  const NDArray& ia = c.known(1, "the indices");
  if (numel_of(ds) > kMaxScatter) c.unsupported("ScatterND of more than 2^20 elements");
  std::vector<int64_t> ix = c.known_ints(1, "the indices");
  if (ia.shape().empty()) c.fail("the indices need rank 1 or more");
  int64_t k = ia.shape().back();
  if (k < 1 || k > static_cast<int64_t>(ds.size())) c.fail("index tuples of " + std::to_string(k) + " for data of rank " + std::to_string(ds.size()));
  std::vector<int64_t> strides = row_major_strides(ds);
  int64_t slice = 1;
  for (size_t d = static_cast<size_t>(k); d < ds.size(); ++d) slice *= ds[d];
  int64_t tuples = k == 0 ? 0 : static_cast<int64_t>(ix.size()) / k;
  if (updates.shape() != [&] {
        Shape s(ia.shape().begin(), ia.shape().end() - 1);
        for (size_t d = static_cast<size_t>(k); d < ds.size(); ++d) s.push_back(Dim(ds[d]));
        return s;
      }())
    c.fail("updates " + updates.type().str() + " do not match the indices and the data");
  std::vector<std::vector<int64_t>> writers(static_cast<size_t>(numel_of(ds)));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t base = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t i = ix[static_cast<size_t>(t * k + j)], n = ds[static_cast<size_t>(j)];
      if (i < -n || i >= n) c.fail("index " + std::to_string(i) + " out of range for a dim of " + std::to_string(n));
      base += (i < 0 ? i + n : i) * strides[static_cast<size_t>(j)];
    }
    for (int64_t e = 0; e < slice; ++e) writers[static_cast<size_t>(base + e)].push_back(t * slice + e);
  }
  return {v(scatter(c, data, updates, writers))};
}

R scatter_elements(Ctx& c) {
  Tensor data = c.in(0), updates = c.in(2);
  std::vector<int64_t> ds = static_shape(c, data, "ScatterElements of a symbolic shape");
  std::vector<int64_t> us = static_shape(c, updates, "ScatterElements of a symbolic shape");
  int64_t axis = axis_of(c, c.attr_int("axis", 0), data.rank());
  if (numel_of(ds) > kMaxScatter) c.unsupported("ScatterElements of more than 2^20 elements");
  std::vector<int64_t> ix = c.known_ints(1, "the indices");
  if (us.size() != ds.size() || static_cast<int64_t>(ix.size()) != numel_of(us)) c.fail("indices, updates and data do not match");
  std::vector<int64_t> dstr = row_major_strides(ds), ustr = row_major_strides(us);
  std::vector<std::vector<int64_t>> writers(static_cast<size_t>(numel_of(ds)));
  for (int64_t u = 0; u < numel_of(us); ++u) {
    int64_t at = 0, rest = u;
    for (size_t d = 0; d < us.size(); ++d) {
      int64_t coord = rest / ustr[d];
      rest %= ustr[d];
      if (static_cast<int64_t>(d) == axis) {
        int64_t i = ix[static_cast<size_t>(u)], n = ds[d];
        if (i < -n || i >= n) c.fail("index " + std::to_string(i) + " out of range for a dim of " + std::to_string(n));
        coord = i < 0 ? i + n : i;
      } else if (coord >= ds[d]) {
        c.fail("updates are larger than the data outside the axis");
      }
      at += coord * dstr[d];
    }
    writers[static_cast<size_t>(at)].push_back(u);
  }
  return {v(scatter(c, data, updates, writers))};
}

// repeats[i] copies along axis i: [.., 1, d_i, ..] expanded to [.., r_i, d_i, ..], merged.
R tile(Ctx& c) {
  Tensor x = c.in(0);
  std::vector<int64_t> reps = c.known_ints(1, "the repeats");
  if (static_cast<int64_t>(reps.size()) != x.rank()) c.fail("repeats has " + std::to_string(reps.size()) + " entries for rank " + std::to_string(x.rank()));
  Shape wide, merged;
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (reps[static_cast<size_t>(i)] < 0) c.fail("negative repeat");
    axes.push_back(2 * i);
    wide.push_back(Dim(reps[static_cast<size_t>(i)]));
    wide.push_back(x.shape()[static_cast<size_t>(i)]);
    merged.push_back(Dim(reps[static_cast<size_t>(i)]) * x.shape()[static_cast<size_t>(i)]);
  }
  return {v(reshape(expand(unsqueeze(x, axes), wide), merged))};
}

// pads = [b_0, .., b_n, e_0, .., e_n] over `axes` (default all); negative
// pads crop.
R pad_(Ctx& c) {
  Tensor x = c.in(0);
  std::vector<int64_t> pads = c.known_ints(1, "the pads");
  std::vector<int64_t> axes;
  if (c.has_input(3)) axes = c.known_ints(3, "the axes");
  else
    for (int64_t i = 0; i < x.rank(); ++i) axes.push_back(i);
  if (pads.size() != 2 * axes.size()) c.fail(std::to_string(pads.size()) + " pads for " + std::to_string(axes.size()) + " axes");
  const auto* m = c.attr("mode");
  std::string mode = m ? m->s() : "constant";
  static const std::map<std::string, PadMode> modes = {
      {"constant", PadMode::constant}, {"edge", PadMode::edge}, {"reflect", PadMode::reflect}, {"wrap", PadMode::wrap}};
  auto it = modes.find(mode);
  if (it == modes.end()) c.fail("unknown mode '" + mode + "'");
  std::vector<int64_t> begin(static_cast<size_t>(x.rank()), 0), end = begin;
  for (size_t k = 0; k < axes.size(); ++k) {
    size_t axis = static_cast<size_t>(axis_of(c, axes[k], x.rank()));
    begin[axis] += pads[k], end[axis] += pads[k + axes.size()];
  }
  return {v(pad(x, begin, end, it->second, c.has_input(2) ? c.in(2) : Tensor()))};
}

// start, limit, delta known: the values, computed here.
R range(Ctx& c) {
  // A symbolic limit, start 0 and delta 1 (exported from torch.arange(n)):
  // iota of the limit.
  if (c.input(1).dims && !c.input(1).known) {
    const Value &s0 = c.input(0), &d0 = c.input(2);
    if (!s0.known || !d0.known || s0.known->get(0) != 0 || d0.known->get(0) != 1 || c.input(1).dims->size() != 1)
      c.unsupported("Range with a symbolic limit other than Range(0, n, 1) is not supported");
    Tensor n = iota(c.in(0), c.input(1).dims->at(0));
    return {v(c.in(0).dtype() == DType::i64 ? n : cast(n, c.in(0).dtype()))};
  }
  const NDArray &s = c.known(0, "start"), &l = c.known(1, "limit"), &d = c.known(2, "delta");
  if (s.numel() != 1 || l.numel() != 1 || d.numel() != 1) c.fail("start, limit and delta must be scalars");
  DType dt = s.dtype();
  double start = s.get(0), limit = l.get(0), delta = d.get(0);
  if (delta == 0) c.fail("delta is 0");
  double count = std::ceil((limit - start) / delta);
  if (!(count <= static_cast<double>(int64_t{1} << 24))) c.unsupported("Range of more than 2^24 elements (computed at import) is not supported");
  int64_t n = std::max<int64_t>(static_cast<int64_t>(count), 0);
  NDArray out(dt, {n});
  for (int64_t i = 0; i < n; ++i)
    if (is_int(dt)) out.set(i, static_cast<double>(static_cast<int64_t>(start) + i * static_cast<int64_t>(delta)));
    else out.set(i, start + static_cast<double>(i) * delta);
  return {known_value(c, std::move(out))};
}

// on_value where the index (negative: from depth) is the position along
// the new axis, off_value elsewhere.
R one_hot(Ctx& c) {
  Tensor idx = c.in(0);
  const NDArray& depth_a = c.known(1, "the depth");  // any numeric type, one value
  if (depth_a.numel() != 1 || !(depth_a.get(0) >= 1) || depth_a.get(0) > (1 << 24)) c.fail("the depth must be one value from 1 to 2^24");
  Tensor vals = c.in(2);  // [off, on], read at run time
  if (vals.rank() != 1 || vals.shape()[0] != Dim(2)) c.fail("values must be [off, on], got " + vals.type().str());
  int64_t depth = static_cast<int64_t>(depth_a.get(0)), rank = idx.rank() + 1;
  int64_t axis = axis_of(c, c.attr_int("axis", -1), rank);
  Tensor i = is_float(idx.dtype()) ? cast(trunc(idx), DType::i64) : cast(idx, DType::i64);
  i = where(lt(i, c.scalar(0, DType::i64)), i + static_cast<double>(depth), i);
  Shape s(static_cast<size_t>(rank), Dim(1));
  s[static_cast<size_t>(axis)] = Dim(depth);
  Tensor hot = eq(unsqueeze(i, {axis}), reshape(iota(idx, Dim(depth)), s));
  Tensor off = reshape(slice(vals, 0, Dim(0), Dim(1)), {}), on = reshape(slice(vals, 0, Dim(1), Dim(2)), {});
  return {v(where(hot, on, off))};
}

// Ones on diagonal k of a 2-D input's shape, in its dtype (or `dtype`).
R eye_like(Ctx& c) {
  Tensor x = c.in(0);
  if (x.rank() != 2) c.fail("the input must be 2-D");
  int64_t n = static_dim(c, x, 0, "EyeLike of a symbolic shape"), m = static_dim(c, x, 1, "EyeLike of a symbolic shape");
  DType dt = c.attr("dtype") ? dtype_of_onnx(static_cast<int32_t>(c.attr_int("dtype", 1)), "dtype") : x.dtype();
  int64_t k = c.attr_int("k", 0);
  if (k < -(int64_t{1} << 40) || k > (int64_t{1} << 40)) c.fail("k is out of range");
  Tensor i = reshape(iota(x, Dim(n)), {Dim(n), Dim(1)}), j = reshape(iota(x, Dim(m)), {Dim(1), Dim(m)});
  return {v(cast(eq(i + static_cast<double>(k), j), dt))};
}

// Per batch entry b, its first lens[b] time steps reversed (lens known).
R reverse_sequence(Ctx& c) {
  Tensor x = c.in(0);
  std::vector<int64_t> lens = c.known_ints(1, "sequence_lens");
  int64_t batch_axis = c.attr_int("batch_axis", 1), time_axis = c.attr_int("time_axis", 0);
  if (x.rank() < 2 || (batch_axis != 0 && batch_axis != 1) || time_axis != 1 - batch_axis) c.fail("batch_axis and time_axis must be 0 and 1");
  int64_t B = static_dim(c, x, batch_axis, "ReverseSequence of a symbolic batch"), T = static_dim(c, x, time_axis, "ReverseSequence of a symbolic time");
  if (static_cast<int64_t>(lens.size()) != B) c.fail("sequence_lens needs one length per batch entry");
  // The source time step of each position: l - 1 - t within the sequence's length l, t after it.
  for (int64_t& l : lens) l = std::clamp<int64_t>(l, 0, T);
  Shape bs(static_cast<size_t>(x.rank()), Dim(1)), ts = bs;
  bs[static_cast<size_t>(batch_axis)] = Dim(B), ts[static_cast<size_t>(time_axis)] = Dim(T);
  Tensor l = reshape(c.tracer.constant(NDArray::of<int64_t>({B}, lens)), bs), t = reshape(iota(x, Dim(T)), ts);
  Tensor idx = expand(where(lt(t, l), l - 1.0 - t, t), x.shape());
  return {v(take_along(x, idx, time_axis))};
}

// [N, C, H, W] <-> [N, C*b*b, H/b, W/b]: a reshape, a permutation, a reshape.
template <bool ToDepth>
R space_depth(Ctx& c) {
  Tensor x = c.in(0);
  if (x.rank() != 4) c.fail("the input must be [N, C, H, W]");
  int64_t b = c.attr_int("blocksize", 0);
  if (b < 1) c.fail("blocksize must be positive");
  const Dim n = x.shape()[0];
  int64_t C = static_dim(c, x, 1, "a symbolic channel dim"), H = static_dim(c, x, 2, "a symbolic spatial dim"), W = static_dim(c, x, 3, "a symbolic spatial dim");
  const auto* m = c.attr("mode");
  bool crd = m && m->s() == "CRD";  // channels then the block's rows and columns; DCR: the block first
  if (ToDepth) {
    if (H % b || W % b) c.fail("H and W must be multiples of blocksize");
    Tensor t = reshape(x, {n, Dim(C), Dim(H / b), Dim(b), Dim(W / b), Dim(b)});
    std::vector<int64_t> perm = crd ? std::vector<int64_t>{0, 1, 3, 5, 2, 4} : std::vector<int64_t>{0, 3, 5, 1, 2, 4};
    return {v(reshape(permute(t, perm), {n, Dim(C * b * b), Dim(H / b), Dim(W / b)}))};
  }
  if (C % (b * b)) c.fail("C must be a multiple of blocksize^2");
  Tensor t = crd ? permute(reshape(x, {n, Dim(C / (b * b)), Dim(b), Dim(b), Dim(H), Dim(W)}), {0, 1, 4, 2, 5, 3})
                 : permute(reshape(x, {n, Dim(b), Dim(b), Dim(C / (b * b)), Dim(H), Dim(W)}), {0, 3, 4, 1, 5, 2});
  return {v(reshape(t, {n, Dim(C / (b * b)), Dim(H * b), Dim(W * b)}))};
}

// Each axis cropped (centred, the extra element at the end) or padded with
// zeros (centred, the extra one at the end) to the given size.
R center_crop_pad(Ctx& c) {
  Tensor x = c.in(0);
  std::vector<int64_t> shape = c.known_ints(1, "the shape");
  std::vector<int64_t> axes = c.attr_ints("axes", {});
  if (axes.empty())
    for (int64_t i = 0; i < x.rank(); ++i) axes.push_back(i);
  if (axes.size() != shape.size()) c.fail("shape and axes differ in length");
  std::vector<int64_t> b(static_cast<size_t>(x.rank()), 0), e = b;
  for (size_t k = 0; k < axes.size(); ++k) {
    size_t a = static_cast<size_t>(axis_of(c, axes[k], x.rank()));
    int64_t n = static_dim(c, x, static_cast<int64_t>(a), "CenterCropPad of a symbolic dim"), want = shape[k];
    if (want < 0) c.fail("a negative size");
    int64_t diff = want - n;  // > 0: pad, < 0: crop
    if (diff >= 0) b[a] = diff / 2, e[a] = diff - diff / 2;
    else b[a] = -((-diff) / 2), e[a] = -((-diff) - (-diff) / 2);
  }
  return {v(pad(x, b, e, PadMode::constant, c.scalar(0, x.dtype())))};
}

// The upper (or lower) triangle of the last two dims from diagonal k.
R trilu(Ctx& c) {
  Tensor x = c.in(0);
  if (x.rank() < 2) c.fail("the input needs rank 2 or more");
  int64_t k = 0;
  if (c.has_input(1)) k = c.known_ints(1, "k").at(0);
  return {v(c.attr_int("upper", 1) ? triu(x, k) : tril(x, k))};
}

}  // namespace

void add_shape_ops(ConverterTable& t) {
  t.insert({
      {"Constant", constant}, {"Shape", shape}, {"Size", size}, {"ConstantOfShape", constant_of_shape},
      {"Identity", identity}, {"Dropout", dropout}, {"Cast", cast_}, {"CastLike", cast_like},
      {"Transpose", transpose_}, {"Reshape", reshape_}, {"Flatten", flatten}, {"Unsqueeze", unsqueeze_}, {"Squeeze", squeeze_},
      {"Expand", expand_}, {"Concat", concat_}, {"Split", split_}, {"Slice", slice_}, {"Gather", gather_},
      {"GatherElements", gather_elements}, {"GatherND", gather_nd}, {"ScatterND", scatter_nd},
      {"ScatterElements", scatter_elements}, {"Tile", tile}, {"Pad", pad_}, {"Range", range}, {"Trilu", trilu},
      {"OneHot", one_hot}, {"EyeLike", eye_like}, {"ReverseSequence", reverse_sequence},
      {"SpaceToDepth", space_depth<true>}, {"DepthToSpace", space_depth<false>}, {"CenterCropPad", center_crop_pad},
  });
}

}  // namespace tj::onnx_import
