#include "reference/random_inputs.h"

#include <cmath>

#include "tensorjit/error.h"

namespace tj {

uint64_t Rng::next() {
  uint64_t z = (s_ += kStep);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  double u1 = uniform(), u2 = uniform();
  return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * M_PI * u2);
}

Bindings random_inputs(const Graph& g, const RandomInputOptions& opts) {
  // Integers used as gather (or scatter_add) indices get the axis as their range.
  std::vector<int64_t> index_range(g.size(), 0);
  for (const Node& n : g.nodes()) {
    if (n.op != Op::gather && n.op != Op::scatter_add) continue;
    const Dim& d = g.type(n.inputs[0]).shape[static_cast<size_t>(n.attr_int("axis"))];
    index_range[static_cast<size_t>(n.inputs[1])] = d.eval(opts.sizes);
  }
  Bindings b;
  Rng rng(opts.seed);
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op != Op::input && n.op != Op::param) continue;
    std::vector<int64_t> shape;
    try {
      shape = eval_shape(n.type.shape, opts.sizes);
    } catch (const Error& e) {
      throw Error(std::string(n.def().name) + " '" + n.name + "' has symbolic shape " + shape_str(n.type.shape) +
                  ": give its sizes (" + e.what() + ")");
    }
    auto fixed = opts.fixed.find(n.name);
    if (opts.given.count(n.name)) {  // its draws: two per float (normal), one per bool or index, none fixed
      int64_t count = 1;
      for (int64_t d : shape) count *= d;
      uint64_t per = fixed != opts.fixed.end()                                ? 0
                     : is_float(n.type.dtype)                                 ? 2
                     : n.type.dtype == DType::boolean || index_range[i] > 0   ? 1
                                                                              : 0;
      rng.skip(static_cast<uint64_t>(count) * per);
      continue;
    }
    NDArray a(n.type.dtype, shape);
    for (int64_t k = 0; k < a.numel(); ++k) {
      double v;
      if (fixed != opts.fixed.end()) {
        v = fixed->second;
      } else if (is_float(n.type.dtype)) {
        if (shape.size() >= 2) v = rng.normal() / std::sqrt(static_cast<double>(std::max<int64_t>(shape[shape.size() - 2], 1)));
        else if (n.name.find("norm") != std::string::npos) v = 1.0 + 0.1 * rng.normal();
        else v = rng.normal();
      } else if (n.type.dtype == DType::boolean) {
        v = static_cast<double>(rng.next() & 1);
      } else {
        int64_t range = index_range[i];
        v = range > 0 ? static_cast<double>(rng.next() % static_cast<uint64_t>(range)) : 0.0;
      }
      a.set(k, v);
    }
    b.emplace(n.name, std::move(a));
  }
  return b;
}

NDArray uniform_array(DType t, std::vector<int64_t> shape, Rng& r, double scale) {
  NDArray a(t, std::move(shape));
  for (int64_t i = 0; i < a.numel(); ++i) a.set(i, (2 * r.uniform() - 1) * scale);
  return a;
}

}  // namespace tj
