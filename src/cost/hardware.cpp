#include "cost/hardware.h"

namespace tj {

std::optional<HardwareProfile> datasheet_profile(const std::string& name) {
  // Dense peaks from the vendors' data sheets (SXM parts); launch overhead is
  // a typical CUDA kernel launch without graphs.
  if (name == "h100") return HardwareProfile{"h100", 989e12, 494e12, 67e12, 3.35e12, 4e-6, "H100 SXM data sheet"};
  if (name == "h200") return HardwareProfile{"h200", 989e12, 494e12, 67e12, 4.8e12, 4e-6, "H200 SXM data sheet"};
  if (name == "a100") return HardwareProfile{"a100", 312e12, 156e12, 19.5e12, 2.039e12, 4e-6, "A100 SXM 80GB data sheet"};
  return std::nullopt;
}

std::vector<std::string> datasheet_names() { return {"h100", "h200", "a100"}; }

}  // namespace tj
