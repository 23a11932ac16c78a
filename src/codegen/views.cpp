// Every target's emitter reading values: an element of any value at an index,
// through views (strided where the layout allows, numpy's no-copy reshape
// included; flat index arithmetic otherwise), broadcasting, generators,
// splat constants and gathers (bounds-checked), never a copy.
#include "codegen/value_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "tensorjit/error.h"

namespace tj::codegen {

// The index of operand `o` (shape so) read at the consumer's index `idx`
// (shape out), numpy-broadcast.
Idx ValueReader::broadcast(ValueId o, const Sizes& out, const Idx& idx) const {
  auto so = shape(o);
  Idx r(so.size());
  size_t off = out.size() - so.size();
  for (size_t d = 0; d < so.size(); ++d) r[d] = so[d] == Dim(1) ? "0" : idx[d + off];
  return r;
}

// The value of `o` at index `idx` (of o's own shape), as a C expression.
std::string ValueReader::load(ValueId o, const Idx& idx) {
  auto it = local_.find(o);
  if (it != local_.end()) return it->second;
  const Node& n = g_.node(o);
  // f16/bf16 elements are read as floats.
  const bool half = is_narrow_float(n.type.dtype);
  auto read = [&](const std::string& e) { return half ? read_narrow(n.type.dtype, e) : e; };
  if (in_mem_[static_cast<size_t>(o)] || is_temp(o)) return read(ptr(o) + "[" + flat(idx, shape(o)) + "]");
  // A view with a strided layout over its buffer: one multiply-add per dim.
  if (g_.node(o).def().category == OpCategory::view) {
    if (auto st = strided(o)) {
      std::string e = C(st->offset);
      for (size_t d = 0; d < idx.size(); ++d)
        if (st->strides[d] != Dim(0) && idx[d] != "0") e += " + (" + idx[d] + ")*" + C(st->strides[d]);
      return read(ptr(st->base) + "[" + e + "]");
    }
  }
  auto so = shape(o);
  switch (n.op) {
    case Op::constant: {  // a splat (an empty constant has no value: it is never read)
      const auto& d = *n.const_data();
      if (!is_float(n.type.dtype) && !d.empty()) {  // exactly: no round trip through double
        CExpr e;
        e.T = T(o);
        e.integer = true;
        return e.lit_int(d.int_at(0));
      }
      return literal(d.empty() ? 0.0 : d[0], n.type.dtype);
    }
    case Op::reshape:
    case Op::squeeze:
    case Op::unsqueeze: {
      ValueId x = n.inputs[0];
      return load(x, reshape_index(idx, so, shape(x)));
    }
    case Op::permute: {
      const auto& p = n.attr_ints("perm");
      Idx xi(p.size());
      for (size_t i = 0; i < p.size(); ++i) xi[static_cast<size_t>(p[i])] = idx[i];
      return load(n.inputs[0], xi);
    }
    case Op::expand: return load(n.inputs[0], broadcast(n.inputs[0], so, idx));
    case Op::slice: {
      Idx xi = idx;
      size_t a = static_cast<size_t>(n.attr_int("axis"));
      int64_t step = n.attr_int("step");
      const Dim& len = so[a];
      xi[a] = len == Dim(0) || len == Dim(1) ? C(n.attr_dim("start"))
                                             : "(" + C(n.attr_dim("start")) + "+" + std::to_string(step) + "LL*(" + idx[a] + "))";
      return load(n.inputs[0], xi);
    }
    case Op::gather: return load_gather(n, idx);
    // The generators (Fuse::generator): values of their index.
    case Op::iota: return rounded("(" + CT(o) + ")(" + idx[0] + ")", n.type.dtype);
    case Op::causal_mask:
      return "((" + idx[1] + ") <= (int64_t)(" + load(n.inputs[0], {}) + ") + (" + idx[0] + ") ? (" + CT(o) + ")0 : (" + CT(o) +
             ")(-INFINITY))";
    default:
      if (n.def().fuse == Fuse::pointwise) return elementwise(n, idx);  // index math, recomputed where read
      throw Error("code generation: cannot read %" + std::to_string(o) + " (" + n.def().name + ") here");
  }
}

// The index into a reshape's input (shape sx) of its output index `idx`
// (shape so), dim group by dim group: the dims between two points where both
// shapes' prefix products agree map only to each other, so a group of one
// dim on each side passes its index through, and only dims really merged or
// split pay a div/mod, by their own sizes. (Through the flat index of the
// whole array, [b, seq, 12, 32] read as [b, seq, 384] was four divisions by
// symbolic sizes per element: an exported attention's output copy took
// 0.6 ms of MiniLM's 0.8 ms output projection.) The flat index where groups
// cannot be shown to agree (a symbolic product that differs from its hint's).
Idx ValueReader::reshape_index(const Idx& idx, const Sizes& so, const Sizes& sx) const {
  auto whole = [&] { return unflat(flat(idx, so), sx); };
  for (const Sizes* s : {&so, &sx})
    for (const Dim& d : *s)
      if (hint(d) <= 0) return whole();  // no element, or a size not known well enough
  Idx xi(sx.size(), "0");
  size_t i = 0, j = 0;
  while (i < so.size() || j < sx.size()) {
    size_t i0 = i, j0 = j;
    Dim po(1), px(1);
    int64_t ho = 1, hx = 1;
    if (i < so.size()) po = so[i], ho = hint(so[i]), ++i;
    if (j < sx.size()) px = sx[j], hx = hint(sx[j]), ++j;
    while (ho != hx) {
      bool overflow = false;
      if (ho < hx && i < so.size()) po = po * so[i], overflow = __builtin_mul_overflow(ho, hint(so[i]), &ho), ++i;
      else if (hx < ho && j < sx.size()) px = px * sx[j], overflow = __builtin_mul_overflow(hx, hint(sx[j]), &hx), ++j;
      else return whole();
      if (overflow) return whole();
    }
    if (po != px) return whole();
    if (i - i0 == 1 && j - j0 == 1) {
      xi[j0] = idx[i0];
      continue;
    }
    Idx part = unflat(flat(Idx(idx.begin() + static_cast<long>(i0), idx.begin() + static_cast<long>(i)),
                           Sizes(so.begin() + static_cast<long>(i0), so.begin() + static_cast<long>(i))),
                      Sizes(sx.begin() + static_cast<long>(j0), sx.begin() + static_cast<long>(j)));
    std::copy(part.begin(), part.end(), xi.begin() + static_cast<long>(j0));
  }
  return xi;
}

namespace {

// The values an integer value can take, [lo, hi], where the graph shows
// them: constants, their views, and sums, differences, products, maxima and
// minima of such (aten's bilinear upsampling builds a flat index as row *
// width + column from two constants). Each value's range must fit its dtype
// (the IR's integer arithmetic wraps: a range past it says nothing).
std::optional<std::pair<int64_t, int64_t>> dtype_range(DType t) {
  switch (t) {
    case DType::i8: return std::pair<int64_t, int64_t>{INT8_MIN, INT8_MAX};
    case DType::u8: return std::pair<int64_t, int64_t>{0, UINT8_MAX};
    case DType::i16: return std::pair<int64_t, int64_t>{INT16_MIN, INT16_MAX};
    case DType::u16: return std::pair<int64_t, int64_t>{0, UINT16_MAX};
    case DType::i32: return std::pair<int64_t, int64_t>{INT32_MIN, INT32_MAX};
    case DType::u32: return std::pair<int64_t, int64_t>{0, UINT32_MAX};
    case DType::i64: return std::pair<int64_t, int64_t>{-(int64_t{1} << 61), int64_t{1} << 61};  // room for a sum of two below
    default: return std::nullopt;  // u64, and the sub-byte types
  }
}

std::optional<std::pair<int64_t, int64_t>> integer_range(const Graph& g, ValueId v, int depth = 0) {
  const Node& n = g.node(v);
  const auto bounds = dtype_range(n.type.dtype);
  if (!bounds || depth > 8) return std::nullopt;
  std::optional<std::pair<int64_t, int64_t>> r;
  if (n.op == Op::constant) {
    const ConstData& d = n.const_data();
    if (d->empty() || d->size() > (size_t{1} << 20)) return std::nullopt;  // not worth the scan
    int64_t lo = d->int_at(0), hi = lo;
    for (size_t i = 1; i < d->size(); ++i) lo = std::min(lo, d->int_at(i)), hi = std::max(hi, d->int_at(i));
    r = {lo, hi};
  } else if (n.def().category == OpCategory::view) {
    r = integer_range(g, n.inputs[0], depth + 1);  // a view reads some of its operand's values
  } else if ((n.op == Op::add || n.op == Op::sub || n.op == Op::mul || n.op == Op::max || n.op == Op::min) && n.inputs.size() == 2) {
    const auto a = integer_range(g, n.inputs[0], depth + 1), b = integer_range(g, n.inputs[1], depth + 1);
    if (!a || !b) return std::nullopt;
    switch (n.op) {
      case Op::add: r = {a->first + b->first, a->second + b->second}; break;
      case Op::sub: r = {a->first - b->second, a->second - b->first}; break;
      case Op::max: r = {std::max(a->first, b->first), std::max(a->second, b->second)}; break;
      case Op::min: r = {std::min(a->first, b->first), std::min(a->second, b->second)}; break;
      default: {
        constexpr int64_t kFactor = int64_t{1} << 31;  // products stay inside int64
        for (int64_t e : {a->first, a->second, b->first, b->second})
          if (e < -kFactor || e > kFactor) return std::nullopt;
        const int64_t p[4] = {a->first * b->first, a->first * b->second, a->second * b->first, a->second * b->second};
        r = {*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
      }
    }
  }
  if (!r || r->first < bounds->first || r->second > bounds->second) return std::nullopt;
  return r;
}

}  // namespace

bool ValueReader::indices_in_range(ValueId ind, const Dim& len) const {
  if (!len.is_const()) return false;
  const auto key = std::make_pair(ind, len.value());
  if (const auto it = in_range_.find(key); it != in_range_.end()) return it->second;
  const auto r = integer_range(g_, ind);
  return in_range_[key] = r && r->first >= 0 && r->second < len.value();
}

// A gather's value at `idx`: the table read at the index it loads (bounds
// checked: an index out of range sets tj_status), or, for indices known to
// lie inside the axis (indices_in_range: Resize's taps from the ONNX
// importer, aten's upsample indices), read directly: the check's store to
// tj_status kept the loop scalar (a 14 -> 224 bilinear upsample over 21
// channels, DeepLabV3's last op, 800 us).
std::string ValueReader::load_gather(const Node& n, const Idx& idx) {
  ValueId table = n.inputs[0], ind = n.inputs[1];
  size_t a = static_cast<size_t>(n.attr_int("axis"));
  size_t ri = static_cast<size_t>(g_.type(ind).rank());
  auto st = shape(table);
  Idx ii(idx.begin() + static_cast<long>(a), idx.begin() + static_cast<long>(a + ri));
  Idx ti(idx.begin(), idx.begin() + static_cast<long>(a));
  if (indices_in_range(ind, st[a])) {
    ti.push_back("(int64_t)(" + load(ind, ii) + ")");
    ti.insert(ti.end(), idx.begin() + static_cast<long>(a + ri), idx.end());
    return load(table, ti);
  }
  std::string checked = "tj_index((int64_t)(" + load(ind, ii) + "), " + C(st[a]) + ")";
  ti.push_back(checked);
  ti.insert(ti.end(), idx.begin() + static_cast<long>(a + ri), idx.end());
  std::string e = load(table, ti);
  // A table read that does not move along the axis (length 1, or
  // broadcast) drops the index: it is still checked.
  if (e.find(checked) == std::string::npos) e = "((void)" + checked + ", " + e + ")";
  return e;
}

// A strided description of `o` if its view chain allows one.
std::optional<Strided> ValueReader::strided(ValueId o) const {
  const Node& n = g_.node(o);
  if (in_mem_[static_cast<size_t>(o)] || temp_.count(o)) return Strided{o, 0, contiguous_strides(shape(o))};
  if (n.def().category != OpCategory::view) return std::nullopt;
  auto inner = strided(n.inputs[0]);
  if (!inner) return std::nullopt;
  auto so = shape(o), si = shape(n.inputs[0]);
  Strided r = *inner;
  switch (n.op) {
    case Op::permute: {
      const auto& p = n.attr_ints("perm");
      r.strides.clear();
      for (int64_t x : p) r.strides.push_back(inner->strides[static_cast<size_t>(x)]);
      return r;
    }
    case Op::expand: {
      r.strides.assign(so.size(), Dim(0));
      size_t off = so.size() - si.size();
      for (size_t d = 0; d < si.size(); ++d) r.strides[d + off] = si[d] == Dim(1) ? Dim(0) : inner->strides[d];
      return r;
    }
    case Op::slice: {
      size_t a = static_cast<size_t>(n.attr_int("axis"));
      r.offset = r.offset + n.attr_dim("start") * inner->strides[a];
      // A slice of one element (or none) never moves along the axis: any step.
      r.strides[a] = so[a] == Dim(0) || so[a] == Dim(1) ? Dim(0) : r.strides[a] * Dim(n.attr_int("step"));
      return r;
    }
    default: {  // reshape, squeeze, unsqueeze (a size-1 dim's stride never matters)
      auto cs = contiguous_strides(si);
      bool contiguous = true;
      for (size_t d = 0; d < si.size(); ++d) contiguous &= si[d] == Dim(1) || inner->strides[d] == cs[d];
      if (contiguous) {
        r.strides = contiguous_strides(so);
        return r;
      }
      if (auto st = reshaped_strides(si, inner->strides, so)) {
        r.strides = std::move(*st);
        return r;
      }
      return std::nullopt;
    }
  }
}

// The strides of a reshape of a strided layout, without a copy, as numpy
// finds them: input and output dims grouped so that each group's sizes have
// equal products; each input group must be contiguous within itself, and its
// output dims then step through it. nullopt when the layout does not allow
// it (or when a group's sizes cannot be compared: symbols on one side only).
std::optional<Sizes> ValueReader::reshaped_strides(const Sizes& si, const Sizes& strides, const Sizes& so) {
  Sizes out(so.size(), Dim(0));
  size_t i = 0, j = 0;
  auto skip_ones = [&] {
    while (i < si.size() && si[i] == Dim(1)) ++i;
    while (j < so.size() && so[j] == Dim(1)) ++j;  // stride 0: never moves
  };
  for (skip_ones(); i < si.size() || j < so.size(); skip_ones()) {
    if (i == si.size() || j == so.size()) return std::nullopt;
    size_t i0 = i, j0 = j;
    Dim pi = si[i++], po = so[j++];
    while (pi != po) {
      if (!pi.is_const() || !po.is_const()) return std::nullopt;
      if (pi.value() < po.value()) {
        if (i == si.size()) return std::nullopt;
        pi = pi * si[i++];
      } else {
        if (j == so.size()) return std::nullopt;
        po = po * so[j++];
      }
    }
    // Contiguous within the group: each dim (of more than one element) steps
    // over the whole of the next such dim.
    size_t last = i0;
    for (size_t d = i0 + 1; d < i; ++d) {
      if (si[d] == Dim(1)) continue;
      if (strides[last] != strides[d] * si[d]) return std::nullopt;
      last = d;
    }
    Dim step = strides[last];
    for (size_t k = j; k-- > j0;) {
      out[k] = so[k] == Dim(1) ? Dim(0) : step;
      step = step * so[k];
    }
  }
  return out;
}

}  // namespace tj::codegen
