// ONNX converters: the losses (NegativeLogLikelihoodLoss, and
// SoftmaxCrossEntropyLoss as it over LogSoftmax). Each position's loss is
// -input[n, target[n, ..], ..] * weight[target], 0 where the target is
// ignore_index; reduced by mean (over the weights of the positions not
// ignored), sum, or none.
#include "frontend/onnx/context.h"

namespace tj::onnx_import {

namespace {

// log_prob [N, C, d..], target [N, d..]: the loss as the attributes say.
Tensor nll(Ctx& c, const Tensor& log_prob, const Tensor& target, const Tensor& weight) {
  if (log_prob.rank() < 2 || target.rank() != log_prob.rank() - 1) c.fail("input must be [N, C, d..] and target [N, d..]");
  const auto* r = c.attr("reduction");
  std::string reduction = r ? r->s() : "mean";
  if (reduction != "mean" && reduction != "sum" && reduction != "none") c.fail("unknown reduction '" + reduction + "'");
  const auto* ig = c.attr("ignore_index");
  Tensor t = cast(target, DType::i64);
  Tensor keep = expand(c.scalar(1, DType::boolean), t.shape());
  if (ig) {
    keep = ne(t, c.scalar(static_cast<double>(ig->i()), DType::i64));
    t = where(keep, t, c.scalar(0, DType::i64));  // an ignored target reads class 0, masked below
  }
  Tensor picked = squeeze(take_along(log_prob, unsqueeze(t, {1}), 1), {1});  // [N, d..]
  Tensor w = weight.defined() ? gather(weight, t, 0) : expand(c.scalar(1, log_prob.dtype()), t.shape());
  w = where(keep, w, c.scalar(0, log_prob.dtype()));
  Tensor loss = neg(picked) * w;
  std::vector<int64_t> all;
  for (int64_t i = 0; i < loss.rank(); ++i) all.push_back(i);
  if (reduction == "none") return loss;
  if (reduction == "sum") return sum(loss, all);
  return sum(loss, all) / sum(w, all);
}

R nll_loss(Ctx& c) { return {v(nll(c, c.in(0), c.in(1), c.has_input(2) ? c.in(2) : Tensor()))}; }

R softmax_cross_entropy(Ctx& c) {
  Tensor x = c.in(0);
  if (x.rank() < 2) c.fail("scores must be [N, C, d..]");
  Tensor d = x - amax(x, {1}, true);
  Tensor log_prob = d - log(sum(exp(d), {1}, true));
  return {v(nll(c, log_prob, c.in(1), c.has_input(2) ? c.in(2) : Tensor())), v(log_prob)};
}

}  // namespace

void add_loss_ops(ConverterTable& t) {
  t.insert({{"NegativeLogLikelihoodLoss", nll_loss}, {"SoftmaxCrossEntropyLoss", softmax_cross_entropy}});
}

}  // namespace tj::onnx_import
