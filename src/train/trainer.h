// Runs a compiled training step (train/step.h) over and over: the params and
// optimizer state live here, and each step's outputs become the next step's
// inputs by exchanging arrays (no copies: the step writes its new params
// into the arrays the step before last read, while it reads the others).
#pragma once

#include <string>
#include <vector>

#include "compiler/options.h"
#include "runtime/executable.h"
#include "train/step.h"

namespace tj {

class Trainer {
 public:
  // `params`: every floating-point param of `loss` (the initial weights);
  // the state starts at zero.
  Trainer(const Graph& loss, const Bindings& params, const OptimizerConfig& o = {}, const CompileOptions& co = {});

  // One step on a batch (the loss graph's inputs, by name) at learning rate
  // `lr`: the loss before the update.
  double step(Bindings& batch, double lr);

  // The current params, by name (valid until the next step).
  Bindings params() const;
  int64_t steps() const { return steps_; }
  const TrainStep& graph() const { return step_; }
  const Executable& executable() const { return exe_; }

 private:
  TrainStep step_;
  Executable exe_;
  Bindings in_;                  // params, state, lr, step, and the batch while a step runs
  std::vector<NDArray> out_;     // the loss, then the new params and state
  std::vector<std::string> carried_;  // per output after the loss: the input it becomes
  int64_t steps_ = 0;
};

}  // namespace tj
