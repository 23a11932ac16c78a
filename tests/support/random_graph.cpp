#include "random_graph.h"

#include <algorithm>

#include "frontend/emit.h"
#include "reference/random_inputs.h"
#include "tensorjit/tensor.h"

namespace tj::testing {

namespace {

class Gen {
 public:
  Gen(uint64_t seed, DType dt) : rng_(seed), dt_(dt), t_("random") {}

  Graph build(int steps) {
    int inputs = 1 + pick(2);
    for (int i = 0; i < inputs; ++i) pool_.push_back(t_.input(std::string("x").append(std::to_string(i)), dt_, random_shape()));
    for (int i = 0; i < steps; ++i) step();
    std::vector<Tensor> outs = {pool_.back()};
    if (pool_.size() > 3 && pick(2)) outs.push_back(pool_[pool_.size() - 2]);
    return t_.finish(outs);
  }

 private:
  int pick(int n) { return static_cast<int>(rng_.next() % static_cast<uint64_t>(n)); }
  int64_t dim() { return 1 + pick(4); }
  Shape random_shape() {
    Shape s;
    int r = 1 + pick(3);
    for (int i = 0; i < r; ++i) s.push_back(dim());
    return s;
  }
  Tensor any() { return pool_[static_cast<size_t>(pick(static_cast<int>(pool_.size())))]; }
  Tensor recent() { return pool_[pool_.size() - 1 - static_cast<size_t>(pick(std::min<int>(3, static_cast<int>(pool_.size()))))]; }
  Tensor param(Shape s) { return t_.param(std::string("p").append(std::to_string(params_++)), dt_, std::move(s)); }
  // A constant the simplifier has rules for, now and then.
  Tensor special_scalar() {
    static const double values[] = {0.0, -0.0, 1.0, 2.0, 0.5, -1.0};
    return t_.scalar(values[pick(6)], dt_);
  }
  // Another operand that broadcasts against x.
  Tensor partner(const Tensor& x) {
    for (int tries = 0; tries < 8; ++tries) {
      Tensor y = any();
      if (y.shape() == x.shape()) return y;
    }
    switch (pick(3)) {
      case 0: return special_scalar();
      case 1: return param({x.shape().back()});
      default: return param(x.shape());
    }
  }

  void step() {
    Tensor x = recent();
    if (x.rank() == 0) x = reshape(x, {1});
    int r = x.rank();
    Tensor y;
    switch (pick(12)) {
      case 0: {
        static const Op unary[] = {Op::neg, Op::exp, Op::tanh, Op::sin, Op::cos, Op::abs, Op::sigmoid, Op::sqrt};
        y = emit(t_, unary[pick(8)], {x});
        break;
      }
      case 1:
      case 2: {
        static const Op binary[] = {Op::add, Op::sub, Op::mul, Op::div, Op::max, Op::min};
        Op op = binary[pick(6)];
        Tensor z = partner(x);
        y = pick(2) ? emit(t_, op, {x, z}) : emit(t_, op, {z, x});
        break;
      }
      case 3: {
        static const Op red[] = {Op::sum, Op::amax, Op::mean};
        y = emit(t_, red[pick(3)], {x}, {{"axes", std::vector<int64_t>{pick(r)}}, {"keepdim", pick(2) == 1}});
        break;
      }
      case 4: {
        if (r < 2) x = reshape(x, {1, x.dim(0)});
        Dim k = x.dim(-1);
        Tensor w = pick(2) ? param({k, dim()}) : transpose(param({dim(), k}));
        y = matmul(x, w);
        break;
      }
      case 5: {
        std::vector<int64_t> perm(static_cast<size_t>(r));
        for (int i = 0; i < r; ++i) perm[static_cast<size_t>(i)] = i;
        std::reverse(perm.begin(), perm.end());
        y = permute(x, perm);
        if (pick(2)) y = permute(y, perm);  // and back
        break;
      }
      case 6:
        y = pick(2) ? reshape(x, {-1}) : unsqueeze(x, {pick(r + 1)});
        break;
      case 7: {
        int64_t n = *x.dim(-1).as_const();
        y = slice(x, -1, pick(2) ? 0 : n / 2, n, 1 + pick(2));
        break;
      }
      case 8: {
        static const Op comp[] = {Op::softmax, Op::silu, Op::gelu};
        Op op = comp[pick(3)];
        y = op == Op::softmax ? softmax(x, pick(r)) : emit(t_, op, {x});
        break;
      }
      case 9:
        y = pick(2) ? rms_norm(x, param({x.dim(-1)})) : layer_norm(x, param({x.dim(-1)}), param({x.dim(-1)}));
        break;
      case 10: {
        Tensor z = partner(x);
        y = concat({x, z.shape() == x.shape() ? z : x}, pick(r));
        break;
      }
      default:
        // The same computation twice, for CSE; or a no-op for simplify.
        y = pick(2) ? exp(x) + exp(x) : (x * special_scalar()) + special_scalar();
        break;
    }
    pool_.push_back(y);
  }

  Rng rng_;
  DType dt_;
  Tracer t_;
  std::vector<Tensor> pool_;
  int params_ = 0;
};

}  // namespace

Graph random_graph(uint64_t seed, DType dtype, int steps) { return Gen(seed, dtype).build(steps); }

}  // namespace tj::testing
