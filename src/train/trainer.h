// Runs a compiled training step (train/step.h) over and over: the params and
// optimizer state live here, once. The step is compiled with its donations,
// so it updates them in place; an update the compiler could not write in
// place (or the interpreter's, without a compiler) comes out in a second
// array, exchanged with the input after the step (no copy).
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
  // Bytes of params and state, and how many of those bytes are updated in place.
  int64_t state_bytes() const { return state_bytes_; }
  int64_t in_place_bytes() const { return in_place_bytes_; }
  const TrainStep& graph() const { return step_; }
  const Executable& executable() const { return exe_; }

 private:
  TrainStep step_;
  Executable exe_;
  Bindings in_;                  // params, state, lr, step, and the batch while a step runs
  std::vector<NDArray> out_;     // the loss, then the new params and state
  std::vector<std::string> carried_;  // per output after the loss: the input it becomes
  std::vector<bool> in_place_;        // per output after the loss: written into that input by the step
  int64_t steps_ = 0, state_bytes_ = 0, in_place_bytes_ = 0;
};

}  // namespace tj
