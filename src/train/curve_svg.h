// A picture of a training run: the loss at each step as a line, with its
// axes labelled (tjc train --svg).
#pragma once

#include <string>
#include <vector>

namespace tj {

std::string loss_curve_svg(const std::vector<double>& loss, const std::string& title);

}  // namespace tj
