// tensorjit._core: the C++ library for Python (nanobind). What Python
// sees: arrays.cpp (numpy and DLPack arrays, no copies), proxy.cpp (the
// Tensor proxy), ops.cpp (numpy-style functions), nn.cpp (the composite layers: conv, pools, norms, pads, scans, sorts), calls.cpp (the C++ JIT
// under a Python function: its calls, the fast path), jit.cpp (what a trace
// sees of its arguments, the ahead-of-time Program, ONNX models, the IR's
// text). The package around it is python/tensorjit/.
#include <nanobind/nanobind.h>

#include "arrays.h"
#include "proxy.h"
#include "tensorjit/error.h"

namespace tj::py {
void bind_jit(nb::module_& m);
void bind_calls(nb::module_& m);
void bind_nn(nb::module_& m);
}

NB_MODULE(_core, m) {
  namespace nb = nanobind;
  using namespace tj::py;
  // tensorjit's errors as Python exceptions: Error (a RuntimeError) and its
  // kinds, most derived registered last (nanobind tries the newest first).
  nb::exception<tj::Error>(m, "Error", PyExc_RuntimeError);
  nb::exception<tj::Unsupported>(m, "Unsupported", m.attr("Error"));
  nb::exception<tj::ParseError>(m, "ParseError", m.attr("Error"));
  nb::exception<tj::ShapeError>(m, "ShapeError", m.attr("Error"));
  nb::exception<tj::UnsupportedOperand>(m, "UnsupportedOperand", m.attr("ShapeError"));
  // Objects still alive when the interpreter finalizes the module (torch's
  // caches hold compiled functions until then) are not leaks of ours worth a
  // warning on every exit.
  nb::set_leak_warnings(false);
  bind_arrays(m);
  bind_proxy(m);
  bind_ops(m);
  bind_nn(m);
  bind_jit(m);
  bind_calls(m);
}
