#include "jit/guards.h"

#include <cstdio>
#include <limits>

namespace tj {

std::string value_str(const JitValue& v) {
  if (auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", std::get<double>(v));
  return buf;
}

namespace {

std::string dim_name(size_t t, int axis) { return "tensors[" + std::to_string(t) + "].shape[" + std::to_string(axis) + "]"; }

// A guard only reads what earlier guards of its list established (counts
// before dtypes, ranks before sizes), so these accesses are in range.
int64_t size_of(const std::vector<NDArray>& ts, size_t t, int axis) { return ts[t].shape()[static_cast<size_t>(axis)]; }

}  // namespace

bool Guard::pass(const std::vector<NDArray>& ts, const std::vector<JitValue>& vs) const {
  switch (kind) {
    case Kind::tensor_count: return static_cast<int64_t>(ts.size()) == lo;
    case Kind::value_count: return static_cast<int64_t>(vs.size()) >= lo;
    case Kind::dtype: return ts[tensor].dtype() == dtype;
    case Kind::rank: return static_cast<int64_t>(ts[tensor].shape().size()) == lo;
    case Kind::size: return size_of(ts, tensor, axis) == lo;
    case Kind::size_range: {
      int64_t s = size_of(ts, tensor, axis);
      return s > lo && s <= hi;
    }
    case Kind::sizes_equal: return size_of(ts, tensor, axis) == size_of(ts, other_tensor, other_axis);
    case Kind::value: return vs[tensor] == value;
  }
  return false;
}

std::string Guard::str() const {
  std::string t = "tensors[" + std::to_string(tensor) + "]";
  switch (kind) {
    case Kind::tensor_count: return "len(tensors) == " + std::to_string(lo);
    case Kind::value_count: return "len(values) >= " + std::to_string(lo);
    case Kind::dtype: return t + ".dtype == " + std::string(dtype_name(dtype));
    case Kind::rank: return t + ".rank == " + std::to_string(lo);
    case Kind::size: return dim_name(tensor, axis) + " == " + std::to_string(lo);
    case Kind::size_range:
      if (hi == std::numeric_limits<int64_t>::max()) return dim_name(tensor, axis) + " >= " + std::to_string(lo + 1) + " (symbolic)";
      return std::to_string(lo) + " < " + dim_name(tensor, axis) + " <= " + std::to_string(hi) + " (bucket " + std::to_string(hi) + ")";
    case Kind::sizes_equal: return dim_name(tensor, axis) + " == " + dim_name(other_tensor, other_axis);
    case Kind::value: return "values[" + std::to_string(tensor) + "] == " + value_str(value);
  }
  return "?";
}

std::string Guard::got(const std::vector<NDArray>& ts, const std::vector<JitValue>& vs) const {
  switch (kind) {
    case Kind::tensor_count: return "got " + std::to_string(ts.size());
    case Kind::value_count: return "got " + std::to_string(vs.size());
    case Kind::dtype: return "got " + std::string(dtype_name(ts[tensor].dtype()));
    case Kind::rank: return "got " + std::to_string(ts[tensor].shape().size());
    case Kind::size:
    case Kind::size_range: return "got " + std::to_string(size_of(ts, tensor, axis));
    case Kind::sizes_equal:
      return "got " + std::to_string(size_of(ts, tensor, axis)) + " and " + std::to_string(size_of(ts, other_tensor, other_axis));
    case Kind::value: return "got " + value_str(vs[tensor]);
  }
  return "";
}

std::vector<std::string> Guards::summary() const {
  std::vector<std::string> lines, others;
  for (size_t i = 0; i < guards_.size(); ++i) {
    const Guard& g = guards_[i];
    if (g.kind != Guard::Kind::dtype) {
      if (g.kind != Guard::Kind::rank && g.kind != Guard::Kind::size && g.kind != Guard::Kind::size_range) others.push_back(g.str());
      continue;
    }
    std::string line = "tensors[" + std::to_string(g.tensor) + "]: " + std::string(dtype_name(g.dtype)) + "[";
    bool first = true;
    for (size_t j = i + 1; j < guards_.size() && guards_[j].tensor == g.tensor; ++j) {
      const Guard& d = guards_[j];
      if (d.kind == Guard::Kind::size) line += (first ? "" : ",") + std::to_string(d.lo), first = false;
      else if (d.kind == Guard::Kind::size_range && d.hi == std::numeric_limits<int64_t>::max())
        line += std::string(first ? "" : ",") + ">=" + std::to_string(d.lo + 1), first = false;
      else if (d.kind == Guard::Kind::size_range) line += (first ? "(" : ",(") + std::to_string(d.lo) + "," + std::to_string(d.hi) + "]", first = false;
      else if (d.kind != Guard::Kind::rank && d.kind != Guard::Kind::sizes_equal) break;
    }
    lines.push_back(line + "]");
  }
  lines.insert(lines.end(), others.begin(), others.end());
  return lines;
}

std::string Guards::first_failure(const std::vector<NDArray>& ts, const std::vector<JitValue>& vs) const {
  for (const Guard& g : guards_)
    if (!g.pass(ts, vs)) return g.str() + " failed (" + g.got(ts, vs) + ")";
  return "";
}

}  // namespace tj
