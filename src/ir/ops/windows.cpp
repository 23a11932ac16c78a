#include "ir/ops/windows.h"

#include <string>

#include "tensorjit/error.h"

namespace tj::windows {

Shape permuted(const Shape& s, const std::vector<int64_t>& perm) {
  Shape o;
  for (int64_t i : perm) o.push_back(s[static_cast<size_t>(i)]);
  return o;
}

ValueId pad_spatial(Decomposer& d, ValueId x, const std::vector<int64_t>& pad_begin, const std::vector<int64_t>& pad_end, ValueId fill) {
  ValueId padded = x;
  for (size_t i = 0; i < pad_begin.size(); ++i) {
    const int64_t axis = static_cast<int64_t>(i + 2);
    std::vector<ValueId> parts;
    auto block = [&](int64_t len) {
      Shape s = d.g.type(padded).shape;
      s[static_cast<size_t>(axis)] = Dim(len);
      return d.op(Op::expand, {fill}, {{"shape", s}});
    };
    if (pad_begin[i] > 0) parts.push_back(block(pad_begin[i]));
    parts.push_back(padded);
    if (pad_end[i] > 0) parts.push_back(block(pad_end[i]));
    if (parts.size() > 1) padded = d.op(Op::concat, parts, {{"axis", axis}});
  }
  return padded;
}

std::vector<ValueId> slices(Decomposer& d, ValueId padded, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                            const std::vector<int64_t>& dilation, const Shape& out, const char* op) {
  const size_t k = kernel.size();
  int64_t taps = 1;
  for (int64_t t : kernel) taps *= t;
  constexpr int64_t kMaxTaps = 4096;
  if (taps > kMaxTaps)
    throw Unsupported(std::string(op) + ": a kernel of " + std::to_string(taps) + " offsets has no window form (at most " + std::to_string(kMaxTaps) +
                      ", each a slice of its own), which this target needs");
  std::vector<ValueId> r;
  std::vector<int64_t> off(k, 0);
  for (;;) {
    ValueId s = padded;
    for (size_t i = 0; i < k; ++i) {
      const int64_t start = off[i] * dilation[i], o = out[i + 2].value();
      s = d.op(Op::slice, {s}, {{"axis", static_cast<int64_t>(i + 2)}, {"start", Dim(start)}, {"end", Dim(start + (o - 1) * stride[i] + 1)},
                                {"step", stride[i]}});
    }
    r.push_back(s);
    size_t i = k;
    while (i > 0 && ++off[i - 1] == kernel[i - 1]) off[--i] = 0;
    if (i == 0) return r;
  }
}

}  // namespace tj::windows
