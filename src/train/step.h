// A compiled training step as one graph: the loss graph's forward (attention
// matched to flash_attn first), its backward (autodiff/vjp.h), and the
// optimizer's update of every floating-point param, compiled together
// (fusion and memory planning see all three). The params become inputs,
// each with its optimizer state:
//
//   inputs:  the loss graph's inputs; then per param P: P, its state
//            (SGD: P.momentum; AdamW: P.m, P.v); then lr and step (f32
//            scalars: the learning rate, and AdamW's 1-based step count for
//            its bias correction)
//   outputs: the loss, then per param: the new P and its new state
//
// Each new param and state is donated to the input it replaces
// (TrainStep::donate): compiled with them, the step updates the params and
// state in place, and they are held once. Trainer (train/trainer.h) runs it.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "schedule/fusion.h"

namespace tj {

struct OptimizerConfig {
  enum class Kind { sgd, adamw } kind = Kind::adamw;
  double momentum = 0.9;                 // SGD (0: plain SGD, no state)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // AdamW
  double weight_decay = 0.0;             // decoupled (AdamW); added to the gradient (SGD)
};

struct TrainStep {
  Graph graph;
  std::vector<std::string> params;              // in the order of their outputs
  std::vector<std::vector<std::string>> state;  // per param: its state inputs, in output order
  std::vector<Donation> donate;                 // every output after the loss, into the input it replaces
};

// `loss`'s first output is the loss (one element). Throws tj::Error when it
// is not, or when `loss` has no floating-point param to train.
TrainStep training_step(const Graph& loss, const OptimizerConfig& o = {});

}  // namespace tj
