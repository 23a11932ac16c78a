// decompose: composite ops become primitives, so fusion sees only
// elementwise ops, reductions and matmuls.
//   softmax(x)        -> e = exp(x - amax(x)); e / sum(e)
//   rms_norm(x, w)    -> x * rsqrt(mean(x*x) + eps) * w
//   layer_norm(x,w,b) -> d = x - mean(x); d * rsqrt(mean(d*d) + eps) * w + b
//   silu(x)           -> x / (1 + exp(-x))
//   gelu(x)           -> 0.5*x * (1 + tanh(sqrt(2/pi) * (x + ((0.044715*x)*x)*x)))
// Each expansion evaluates in the same order as the interpreter's fused
// kernel, so in f64 the result is bit-identical; in f32 the kernels' double
// intermediates differ from f32 primitives by an ulp or so.
#include <cmath>

#include "passes/passes.h"
#include "passes/rewriter.h"

namespace tj {

namespace {

struct Builder {
  Graph& g;
  DType dt;
  ValueId c(double v) { return g.add_const({dt, {}}, std::vector<double>{v}); }
  ValueId op(Op o, std::vector<ValueId> in, const NamedAttrs& a = {}) { return g.add(o, std::move(in), a); }
  ValueId reduce(Op o, ValueId x, int64_t axis) {
    return op(o, {x}, {{"axes", std::vector<int64_t>{axis}}, {"keepdim", true}});
  }
};

ValueId expand_node(Builder& b, const Node& n, const std::vector<ValueId>& in) {
  ValueId x = in[0];
  int64_t last = n.type.rank() - 1;
  switch (n.op) {
    case Op::softmax: {
      int64_t axis = n.attr_int("axis");
      ValueId e = b.op(Op::exp, {b.op(Op::sub, {x, b.reduce(Op::amax, x, axis)})});
      return b.op(Op::div, {e, b.reduce(Op::sum, e, axis)});
    }
    case Op::rms_norm: {
      ValueId ms = b.reduce(Op::mean, b.op(Op::mul, {x, x}), last);
      ValueId r = b.op(Op::rsqrt, {b.op(Op::add, {ms, b.c(n.attr_float("eps"))})});
      return b.op(Op::mul, {b.op(Op::mul, {x, r}), in[1]});
    }
    case Op::layer_norm: {
      ValueId d = b.op(Op::sub, {x, b.reduce(Op::mean, x, last)});
      ValueId var = b.reduce(Op::mean, b.op(Op::mul, {d, d}), last);
      ValueId r = b.op(Op::rsqrt, {b.op(Op::add, {var, b.c(n.attr_float("eps"))})});
      return b.op(Op::add, {b.op(Op::mul, {b.op(Op::mul, {d, r}), in[1]}), in[2]});
    }
    case Op::silu:
      return b.op(Op::div, {x, b.op(Op::add, {b.c(1.0), b.op(Op::exp, {b.op(Op::neg, {x})})})});
    case Op::gelu: {
      ValueId cube = b.op(Op::mul, {b.op(Op::mul, {b.op(Op::mul, {b.c(0.044715), x}), x}), x});
      ValueId u = b.op(Op::mul, {b.c(std::sqrt(2.0 / M_PI)), b.op(Op::add, {x, cube})});
      ValueId v = b.op(Op::add, {b.c(1.0), b.op(Op::tanh, {u})});
      return b.op(Op::mul, {b.op(Op::mul, {b.c(0.5), x}), v});
    }
    default: return -1;
  }
}

}  // namespace

bool decompose(Graph& g, const PassOptions&) {
  bool changed = false;
  Rewriter rw(g);
  g = rw.run([&](ValueId v) -> ValueId {
    const Node& n = g.node(v);
    if (n.def().category != OpCategory::composite) return Rewriter::kCopy;
    Builder b{rw.out(), n.type.dtype};
    ValueId r = expand_node(b, n, rw.map_all(n.inputs));
    if (r < 0) return Rewriter::kCopy;
    changed = true;
    return r;
  });
  return changed;
}

}  // namespace tj
