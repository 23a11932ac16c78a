// tjc grad: the backward of a model's first output, forward and backward as
// the saved-value partitioner splits them; with `report`, what each forward
// kernel computes and what of it is saved for the backward.
#pragma once

#include <string>
#include <vector>

#include "bench/model.h"

namespace tj::bench {

struct GradOptions {
  ModelSpec spec;
  std::vector<std::string> wrt;
  bool report = false, json = false;
};

void grad_report(const GradOptions& a);

}  // namespace tj::bench
