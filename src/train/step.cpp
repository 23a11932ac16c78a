#include "train/step.h"

#include "autodiff/vjp.h"
#include "ir/extract.h"
#include "passes/passes.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

// `g` with its params as inputs of the same names (they are trained, not
// frozen); value ids unchanged.
Graph params_as_inputs(const Graph& g) {
  Graph r = copy_graph(g, [&](Graph& s, ValueId v) {
    const Node& n = g.node(v);
    return n.op == Op::constant ? s.copy_const(n) : s.add_input(n.name, n.type);
  });
  r.set_name(g.name() + "_step");
  return r;
}

}  // namespace

TrainStep training_step(const Graph& loss, const OptimizerConfig& o) {
  if (loss.outputs().empty()) throw Error("training_step: the loss graph has no output");
  std::vector<std::string> params;
  for (ValueId p : loss.params())
    if (is_float(loss.type(p).dtype)) params.push_back(loss.node(p).name);
  if (params.empty()) throw Error("training_step: " + loss.name() + " has no floating-point param to train");

  VjpSpec spec;
  spec.wrt = params;
  spec.outputs = {0};
  spec.seed_ones = true;
  // Attention as one flash_attn first: its rule recomputes the scores in
  // the backward (for long sequences without ever holding them whole),
  // where softmax's would keep the probabilities from the forward.
  Graph fwd = params_as_inputs(loss);
  match_attention(fwd, {});
  Vjp v = vjp(fwd, spec);
  Graph& g = v.joint;

  const DType f32 = DType::f32;
  ValueId lr = g.add_input("lr", {f32, {}});
  ValueId step = g.add_input("step", {f32, {}});
  TrainStep r{Graph(), params, {}, {}};
  std::vector<ValueId> outs = {g.outputs()[0]};
  for (size_t k = 0; k < params.size(); ++k) {
    ValueId p = g.find(params[k]);
    ValueId grad = g.outputs()[v.forward_outputs + k];
    const Type t = g.type(p);
    auto c = [&](double x) { return g.add_const({t.dtype, {}}, std::vector<double>{x}); };
    auto op = [&](Op f, ValueId a, ValueId b) { return g.add(f, {a, b}); };
    auto as_t = [&](ValueId s) { return t.dtype == f32 ? s : g.add(Op::cast, {s}, {{"to", t.dtype}}); };
    ValueId rate = as_t(lr);
    std::vector<std::string> state;
    std::vector<ValueId> new_state;
    ValueId next;
    if (o.kind == OptimizerConfig::Kind::sgd) {
      if (o.weight_decay != 0) grad = op(Op::add, grad, op(Op::mul, c(o.weight_decay), p));
      ValueId dir = grad;
      if (o.momentum != 0) {
        state.push_back(params[k] + ".momentum");
        ValueId b = g.add_input(state.back(), t);
        dir = op(Op::add, op(Op::mul, c(o.momentum), b), grad);
        new_state.push_back(dir);
      }
      next = op(Op::sub, p, op(Op::mul, rate, dir));
    } else {
      // AdamW (Loshchilov and Hutter; torch.optim.AdamW's order of operations):
      // m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr wd p; then
      // p -= lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
      state = {params[k] + ".m", params[k] + ".v"};
      ValueId m = g.add_input(state[0], t), vv = g.add_input(state[1], t);
      ValueId m2 = op(Op::add, op(Op::mul, c(o.beta1), m), op(Op::mul, c(1 - o.beta1), grad));
      ValueId v2 = op(Op::add, op(Op::mul, c(o.beta2), vv), op(Op::mul, c(1 - o.beta2), op(Op::mul, grad, grad)));
      ValueId t_step = as_t(step);
      ValueId bc1 = op(Op::sub, c(1), op(Op::pow, c(o.beta1), t_step));
      ValueId bc2 = op(Op::sub, c(1), op(Op::pow, c(o.beta2), t_step));
      ValueId denom = op(Op::add, g.add(Op::sqrt, {op(Op::div, v2, bc2)}), c(o.eps));
      ValueId decayed = o.weight_decay != 0 ? op(Op::sub, p, op(Op::mul, op(Op::mul, rate, c(o.weight_decay)), p)) : p;
      next = op(Op::sub, decayed, op(Op::mul, rate, op(Op::div, op(Op::div, m2, bc1), denom)));
      new_state = {m2, v2};
    }
    r.donate.push_back({outs.size(), params[k]});
    outs.push_back(next);
    for (size_t j = 0; j < state.size(); ++j) {
      r.donate.push_back({outs.size(), state[j]});
      outs.push_back(new_state[j]);
    }
    r.state.push_back(state);
  }
  g.set_outputs(outs);
  r.graph = std::move(g);
  return r;
}

}  // namespace tj
