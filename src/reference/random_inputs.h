// Seeded random values for a graph's inputs and params, for `tjc run`, tests
// and benchmarks. Deterministic for a given seed on every platform.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "reference/interpreter.h"

namespace tj {

struct RandomInputOptions {
  uint64_t seed = 0;
  SymEnv sizes;                                         // values of symbolic dims
  std::map<std::string, double, std::less<>> fixed;     // scalar inputs given by name
  // Inputs and params the caller binds itself (an ONNX model's 90 MB of
  // initializers): not made, and the others get the values they would get
  // without this (the stream skips the draws the given ones would take).
  std::set<std::string, std::less<>> given;
};

// Floats: matrices ~ N(0, 1/fan_in) (fan_in = second-last dim), vectors whose
// name contains "norm" ~ 1 + 0.1 N(0,1), others ~ N(0,1). Integers that feed a
// gather as indices are uniform over the gathered axis; other integers are 0
// unless fixed. Bools are 0/1 at random.
Bindings random_inputs(const Graph& g, const RandomInputOptions& opts);
inline Bindings random_inputs(const Graph& g, uint64_t seed) {
  RandomInputOptions o;
  o.seed = seed;
  return random_inputs(g, o);
}

// A splitmix64-based generator with a portable normal.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next();
  double uniform();  // [0, 1)
  double normal();
  void skip(uint64_t draws) { s_ += draws * kStep; }  // as `draws` calls of next()

 private:
  static constexpr uint64_t kStep = 0x9e3779b97f4a7c15ull;
  uint64_t s_;
};

// An array of `shape` whose values are (2u - 1) * scale, u uniform in [0, 1)
// drawn from `r` in order: uniform in [-scale, scale).
NDArray uniform_array(DType t, std::vector<int64_t> shape, Rng& r, double scale = 1);

}  // namespace tj
