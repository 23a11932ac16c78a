// A picture of a memory plan: time (kernel positions) across, arena offset
// up, one rectangle per buffer, labelled with its value and size.
#pragma once

#include <string>

#include "memory/lifetimes.h"

namespace tj {

std::string memory_plan_svg(const Graph& g, const ActivationPlan& p, const std::string& title);

}  // namespace tj
