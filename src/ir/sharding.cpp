#include "ir/sharding.h"

#include <set>

#include "tensorjit/error.h"

namespace tj {

int64_t Mesh::devices() const {
  int64_t n = 1;
  for (const MeshAxis& a : axes) n *= a.size;
  return n;
}

int Mesh::axis(std::string_view name) const {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i].name == name) return static_cast<int>(i);
  return -1;
}

std::string Mesh::str() const {
  std::string s = "{";
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? ", " : "") + axes[i].name + "=" + std::to_string(axes[i].size);
  return s + "}";
}

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::sum: return "sum";
    case Reduction::max: return "max";
    case Reduction::min: return "min";
  }
  return "?";
}

std::optional<Reduction> parse_reduction(std::string_view name) {
  for (Reduction r : {Reduction::sum, Reduction::max, Reduction::min})
    if (name == reduction_name(r)) return r;
  return std::nullopt;
}

bool Sharding::replicated() const {
  for (const auto& d : dims)
    if (!d.empty()) return false;
  return partial.empty();
}

std::vector<std::string> Sharding::axes() const {
  std::vector<std::string> out;
  for (const auto& d : dims) out.insert(out.end(), d.begin(), d.end());
  for (const auto& [a, r] : partial) out.push_back(a);
  return out;
}

std::string axes_str(const std::vector<std::string>& axes) {
  if (axes.size() == 1) return axes[0];
  std::string s = "(";
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? "," : "") + axes[i];
  return s + ")";
}

std::string sharded_type_str(const Type& t, const Sharding* s) {
  if (!s || s->replicated()) return t.str();
  std::string out = std::string(dtype_name(t.dtype)) + "[";
  for (size_t i = 0; i < t.shape.size(); ++i) {
    out += (i ? "," : "") + t.shape[i].str();
    if (i < s->dims.size() && !s->dims[i].empty()) out += "@" + axes_str(s->dims[i]);
  }
  out += "]";
  if (!s->partial.empty()) {
    out += " partial(";
    for (size_t k = 0; k < s->partial.size(); ++k) {
      const auto& [a, r] = s->partial[k];
      out += (k ? ", " : "") + a + (r == Reduction::sum ? "" : std::string(":") + reduction_name(r));
    }
    out += ")";
  }
  return out;
}

int64_t split_count(const Mesh& m, const std::vector<std::string>& axes) {
  int64_t n = 1;
  for (const std::string& a : axes) {
    const int i = m.axis(a);
    if (i >= 0) n *= m.axes[static_cast<size_t>(i)].size;
  }
  return n;
}

void check_sharding(const Mesh& m, const Type& t, const Sharding& s) {
  const std::string what = sharded_type_str(t, &s);
  if (m.empty()) throw Error("sharding " + what + ": the graph has no mesh");
  if (s.dims.size() != t.shape.size())
    throw Error("sharding " + what + ": " + std::to_string(s.dims.size()) + " dims for a value of rank " + std::to_string(t.rank()));
  std::set<std::string> seen;
  for (const std::string& a : s.axes()) {
    if (m.axis(a) < 0) throw Error("sharding " + what + ": the mesh " + m.str() + " has no axis '" + a + "'");
    if (!seen.insert(a).second) throw Error("sharding " + what + ": axis '" + a + "' is used twice");
  }
  for (size_t i = 0; i < s.dims.size(); ++i) {
    if (s.dims[i].empty()) continue;
    const int64_t n = split_count(m, s.dims[i]);
    const auto size = t.shape[i].as_const();
    if (!size)
      throw Error("sharding " + what + ": dim " + std::to_string(i) + " (" + t.shape[i].str() +
                  ") is symbolic; splitting it needs a guard that " + std::to_string(n) + " divides it, which is not supported");
    if (*size % n != 0)
      throw Error("sharding " + what + ": dim " + std::to_string(i) + " of " + std::to_string(*size) + " does not split over " + std::to_string(n) +
                  " devices");
  }
}

}  // namespace tj
