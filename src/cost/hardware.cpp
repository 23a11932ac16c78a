#include "cost/hardware.h"

#include "cost/calibrate.h"
#include "tensorjit/error.h"

namespace tj {

HardwareProfile hardware_profile(const std::string& name) {
  // Dense peaks from the vendors' data sheets (SXM parts); launch overhead is
  // a typical CUDA kernel launch without graphs.
  if (name == "h100") return {"h100", 989e12, 494e12, 67e12, 3.35e12, 4e-6, "H100 SXM data sheet"};
  if (name == "h200") return {"h200", 989e12, 494e12, 67e12, 4.8e12, 4e-6, "H200 SXM data sheet"};
  if (name == "a100") return {"a100", 312e12, 156e12, 19.5e12, 2.039e12, 4e-6, "A100 SXM 80GB data sheet"};
  if (name == "cpu") {
    Calibration c;
    if (!load_calibration(&c)) {
      c = measure_machine();
      save_calibration(c);
    }
    return cpu_profile(c);
  }
  throw Error("unknown hardware '" + name + "' (known: h100, h200, a100, cpu)");
}

std::vector<std::string> hardware_names() { return {"h100", "h200", "a100", "cpu"}; }

}  // namespace tj
