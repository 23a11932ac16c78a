#include "jit/buckets.h"

#include <utility>
#include <vector>

namespace tj {

namespace {

bool symbolic(const Dim& d) { return !d.is_const(); }

// (product of the dims before it, the dim) for each symbolic dim.
std::vector<std::pair<Dim, Dim>> symbolic_positions(const Shape& s) {
  std::vector<std::pair<Dim, Dim>> r;
  Dim before(1);
  for (const Dim& d : s) {
    if (symbolic(d)) r.emplace_back(before, d);
    before = before * d;
  }
  return r;
}

}  // namespace

std::string bucketing_hazard(const Graph& g) {
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    auto where = [&](const std::string& what) { return "%" + std::to_string(i) + " = " + n.def().name + ": " + what; };
    auto in_shape = [&](size_t k) -> const Shape& { return g.type(n.inputs[k]).shape; };
    switch (n.op) {
      case Op::concat: {
        size_t axis = static_cast<size_t>(n.attr_int("axis"));
        for (size_t k = 0; k < n.inputs.size(); ++k)
          if (symbolic(in_shape(k)[axis])) return where("concatenates along a bucketed axis");
        break;
      }
      case Op::slice:
        if (symbolic(in_shape(0)[static_cast<size_t>(n.attr_int("axis"))])) return where("slices a bucketed axis");
        break;
      case Op::mean:
      case Op::prod:
        for (int64_t a : n.attr_ints("axes"))
          if (symbolic(in_shape(0)[static_cast<size_t>(a)]))
            return where(n.op == Op::mean ? "averages over a bucketed axis" : "multiplies over a bucketed axis (its zero padding)");
        break;
      case Op::reshape:
        if (symbolic_positions(in_shape(0)) != symbolic_positions(n.type.shape)) return where("moves a bucketed axis's padding");
        break;
      default: break;
    }
  }
  return "";
}

}  // namespace tj
