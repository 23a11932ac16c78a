// What a traced Python function sees of its arguments (_JitArgs), the
// ahead-of-time Program, ONNX models and the IR's text. The jit function's
// calls are calls.cpp's.
#include <nanobind/stl/function.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "calls.h"
#include "compiler/options.h"
#include "proxy.h"
#include "runtime/thread_pool.h"
#include "tensorjit/compile.h"
#include "tensorjit/error.h"
#include "tensorjit/graph.h"
#include "tensorjit/jit.h"
#include "tensorjit/onnx.h"

namespace tj::py {

void bind_jit(nb::module_& m) {
  nb::class_<JitArgs>(m, "_JitArgs")
      .def("tensor", [](JitArgs& a, size_t i) { return wrap(a.tensor(i)); })
      .def("integer", [](JitArgs& a, size_t i) { return a.integer(i); })
      .def("number", [](JitArgs& a, size_t i) { return a.number(i); })
      .def("flag", [](JitArgs& a, size_t i) { return a.flag(i); })
      .def("real_size", [](JitArgs& a, size_t i, int axis) { return wrap(a.real_size(i, axis)); })
      // A frozen weight: copied into the compilation once (the array may go
      // away or change), or borrowed: read in place (kept_array).
      .def("param", [](JitArgs& a, const std::string& name, nb::handle array, bool borrow) {
        return wrap(a.param(name, kept_array(array, "frozen weight '" + name + "'", borrow)));
      }, nb::arg("name"), nb::arg("array"), nb::arg("borrow") = false);

  nb::class_<TracedGraph>(m, "Graph", "A graph in tensorjit's IR (docs/ir.md).")
      .def_static("parse", [](const std::string& text) { return TracedGraph::parse(text); })
      .def_prop_ro("text", &TracedGraph::text)
      .def_prop_ro("name", &TracedGraph::name)
      .def("__str__", &TracedGraph::text)
      .def_prop_ro("inputs", [](const TracedGraph& g) {
        std::vector<std::string> r;
        for (const Port& p : g.inputs()) r.push_back(p.name);
        return r;
      })
      .def_prop_ro("params", [](const TracedGraph& g) {
        std::vector<std::string> r;
        for (const Port& p : g.params()) r.push_back(p.name);
        return r;
      });

  nb::class_<Program>(m, "Program", "A compiled graph: generated C++ kernels run from a static plan.")
      .def_static("compile", [](const TracedGraph& g, const nb::dict& params, const std::string& weights, const std::string& device) {
        AotOptions o;
        o.weights = weights_format(weights);
        o.device = device;
        Bindings b;
        for (auto [k, v] : params) {
          b.emplace(nb::cast<std::string>(k), kept_array(v, "param '" + nb::cast<std::string>(k) + "'", false));  // frozen: the program keeps its own
        }
        nb::gil_scoped_release released;
        return Program::compile(g, b, o);
      }, nb::arg("graph"), nb::arg("params") = nb::dict(), nb::arg("weights") = "f32", nb::arg("device") = "")
      .def("run", [](Program& p, const nb::dict& inputs) {
        Bindings b;
        for (auto [k, v] : inputs) b.emplace(nb::cast<std::string>(k), as_array(v, "input '" + nb::cast<std::string>(k) + "'"));
        std::vector<NDArray> out;
        {
          nb::gil_scoped_release released;
          out = p.run(b);
        }
        return results(std::move(out));
      })
      .def_prop_ro("inputs", [](const Program& p) {
        std::vector<std::string> r;
        for (const Port& x : p.inputs()) r.push_back(x.name);
        return r;
      })
      .def_prop_ro("compiled", &Program::compiled)
      .def_prop_ro("kernels", &Program::kernels)
      .def_prop_ro("source", &Program::source);

  // A model compiled per value of the inputs that decide its shapes
  // (tensorjit.onnx.load uses it; tensorjit/onnx.h's OnnxFunction).
  nb::class_<OnnxFunction>(m, "_OnnxFunction")
      .def("__init__", [](OnnxFunction* self, const std::string& path, const std::string& weights, const std::string& device) {
        AotOptions o;
        o.weights = weights_format(weights);
        o.device = device;
        nb::gil_scoped_release released;
        new (self) OnnxFunction(path, {}, o);
      }, nb::arg("path"), nb::arg("weights") = "f32", nb::arg("device") = "")
      .def("run", [](OnnxFunction& f, const nb::dict& inputs) {
        Bindings b;
        for (auto [k, v] : inputs) b.emplace(nb::cast<std::string>(k), as_array(v, "input '" + nb::cast<std::string>(k) + "'"));
        std::vector<NDArray> out;
        {
          nb::gil_scoped_release released;
          out = f(b);
        }
        return results(std::move(out));
      })
      .def_prop_ro("input_names", &OnnxFunction::input_names)
      .def_prop_ro("output_names", &OnnxFunction::output_names)
      .def_prop_ro("specialized", &OnnxFunction::specialized)
      .def_prop_ro("programs", &OnnxFunction::programs)
      .def_prop_ro("imported", &OnnxFunction::imported);

  // Compiled code's parallel loops on the process's OpenMP team (torch's),
  // not on tensorjit's own threads; false where there is none.
  m.def("_share_openmp_threads", [](bool on) { return ThreadPool::global().share_openmp_team(on); });

  // Where compiled code runs, by name: "cpu", then each device of the
  // registry (runtime/device/backend.h), in order; device= is one of them.
  m.def("device_names", [] {
    std::vector<std::string> names;
    for (std::string_view n : device_names()) names.emplace_back(n);
    return names;
  });

  m.def("_compile_onnx", [](const std::string& path, const std::string& weights, const std::string& device) {
    OnnxProgram r;
    AotOptions o;
    o.weights = weights_format(weights);
    o.device = device;
    {
      nb::gil_scoped_release released;
      r = compile_onnx(path, {}, o);
    }
    return nb::make_tuple(nb::cast(std::move(r.program)), r.output_names, r.imported);
  }, nb::arg("path"), nb::arg("weights") = "f32", nb::arg("device") = "");
}

}  // namespace tj::py
