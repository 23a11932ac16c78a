// The C++ JIT (tensorjit/jit.h) under a Python function, the ahead-of-time
// Program, ONNX models and the IR's text. Guards, recompilation, dynamic
// shapes and graph breaks are the C++ JIT's: the Python layer only flattens
// arguments (python/tensorjit/_jit.py).
#include <nanobind/stl/function.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "proxy.h"
#include "tensorjit/compile.h"
#include "tensorjit/error.h"
#include "tensorjit/graph.h"
#include "tensorjit/jit.h"
#include "tensorjit/onnx.h"

namespace tj::py {

namespace {

std::vector<NDArray> views(const nb::list& arrays, const char* what) {
  std::vector<NDArray> r;
  size_t i = 0;
  for (nb::handle a : arrays) r.push_back(as_array(a, std::string(what) + " " + std::to_string(i++)));
  return r;
}

std::vector<JitValue> values_of(const nb::list& values) {
  std::vector<JitValue> r;
  for (nb::handle v : values) {
    if (nb::isinstance<nb::bool_>(v)) r.emplace_back(nb::cast<bool>(v));
    else if (nb::isinstance<nb::int_>(v)) r.emplace_back(nb::cast<int64_t>(v));
    else r.emplace_back(nb::cast<double>(v));
  }
  return r;
}

// Results out as numpy arrays. A result that is an input's memory (a
// donated cache written in place, or an input passed through) is that
// input's Python object, with no copy; another view is copied, so that it
// never outlives the memory it shows.
nb::list results(std::vector<NDArray>&& outs, const std::vector<NDArray>& in = {}, const nb::list* objects = nullptr) {
  nb::list r;
  for (NDArray& a : outs) {
    if (a.is_view()) {
      bool same = false;
      for (size_t k = 0; objects && k < in.size() && !same; ++k)
        if (in[k].raw() == a.raw() && in[k].dtype() == a.dtype() && in[k].shape() == a.shape()) {
          r.append((*objects)[k]);
          same = true;
        }
      if (same) continue;
      a = NDArray::copy_of(a.dtype(), a.shape(), a.raw(), a.nbytes());
    }
    r.append(to_numpy(std::move(a)));
  }
  return r;
}

// The Python function being called: the C++ JIT traces it (on a miss, or
// on every call of a function that breaks) only within a call. It is passed
// with each call rather than held by the C++ object: a Python reference held
// there would make a cycle (function -> its globals -> the jit wrapper ->
// this object) that Python's collector cannot see through.
thread_local PyObject* g_traced = nullptr;

// The C++ JIT's traced function: the Python function of the call under
// way, given the arguments as a _JitArgs; it returns a list of proxies.
JitFn traced() {
  return [](JitArgs& a) {
    nb::gil_scoped_acquire gil;
    if (!g_traced) throw Error("tensorjit: a jit function traced outside a call");
    TraceScope scope(&a.tracer());
    nb::object r = nb::handle(g_traced)(nb::cast(&a, nb::rv_policy::reference));
    return unwrap_all(nb::cast<std::vector<Proxy>>(r));
  };
}

DynamicPolicy policy_of(const std::string& s) {
  if (s == "static") return DynamicPolicy::static_shapes;
  if (s == "bucketed") return DynamicPolicy::bucketed;
  if (s == "symbolic") return DynamicPolicy::symbolic;
  if (s == "automatic") return DynamicPolicy::automatic;
  throw Error("unknown dynamic policy '" + s + "' (static, bucketed, symbolic, automatic)");
}

}  // namespace

void bind_jit(nb::module_& m) {
  nb::class_<JitArgs>(m, "_JitArgs")
      .def("tensor", [](JitArgs& a, size_t i) { return wrap(a.tensor(i)); })
      .def("integer", [](JitArgs& a, size_t i) { return a.integer(i); })
      .def("number", [](JitArgs& a, size_t i) { return a.number(i); })
      .def("flag", [](JitArgs& a, size_t i) { return a.flag(i); })
      .def("real_size", [](JitArgs& a, size_t i, int axis) { return wrap(a.real_size(i, axis)); })
      // A frozen weight: copied into the compilation (the array may go away).
      .def("param", [](JitArgs& a, const std::string& name, nb::handle array) {
        NDArray v = as_array(array, "frozen weight '" + name + "'");
        return wrap(a.param(name, NDArray::copy_of(v.dtype(), v.shape(), v.raw(), v.nbytes())));
      });

  nb::class_<JitFunction>(m, "_JitFunction")
      .def("__init__",
           [](JitFunction* self, std::string name, const std::string& policy, std::vector<std::vector<int64_t>> dims,
              int64_t bucket_multiple, size_t cache_limit, bool compile) {
             JitOptions o;
             o.policy = policy_of(policy);
             // dims: [tensor, axis, policy (0 static, 1 bucketed, 2 symbolic)]
             for (const auto& d : dims) {
               if (d.size() != 3) throw Error("a dim policy is [tensor, axis, policy]");
               o.dims.push_back({static_cast<size_t>(d[0]), static_cast<int>(d[1]), d[2] == 0 ? DynamicPolicy::static_shapes
                                                                                      : d[2] == 1 ? DynamicPolicy::bucketed
                                                                                                  : DynamicPolicy::symbolic});
             }
             o.buckets.multiple = bucket_multiple;
             o.cache_limit = cache_limit;
             o.compile = compile;
             new (self) JitFunction(std::move(name), traced(), o);
           })
      .def("__call__", [](JitFunction& f, nb::callable fn, const nb::list& tensors, const nb::list& values) {
        std::vector<NDArray> in = views(tensors, "array argument");
        std::vector<JitValue> vals = values_of(values);
        std::vector<NDArray> out;
        PyObject* outer = g_traced;
        g_traced = fn.ptr();
        try {
          nb::gil_scoped_release released;  // retaken by the traced function on a miss
          out = f(in, vals);
        } catch (...) {
          g_traced = outer;
          throw;
        }
        g_traced = outer;
        return results(std::move(out), in, &tensors);
      })
      .def("explain", &JitFunction::explain)
      .def_prop_ro("stats", [](const JitFunction& f) {
        const JitStats& s = f.stats();
        nb::dict d;
        d["calls"] = s.calls, d["hits"] = s.hits, d["compilations"] = s.compilations, d["eager_calls"] = s.eager_calls;
        d["graph_breaks"] = s.graph_breaks, d["graphs_run"] = s.graphs_run, d["compile_seconds"] = s.compile_seconds;
        return d;
      });

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
      .def_static("compile", [](const TracedGraph& g, const nb::dict& params) {
        Bindings b;
        for (auto [k, v] : params) {
          NDArray a = as_array(v, "param '" + nb::cast<std::string>(k) + "'");
          b.emplace(nb::cast<std::string>(k), NDArray::copy_of(a.dtype(), a.shape(), a.raw(), a.nbytes()));  // frozen: the program keeps its own
        }
        nb::gil_scoped_release released;
        return Program::compile(g, b);
      }, nb::arg("graph"), nb::arg("params") = nb::dict())
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

  m.def("_compile_onnx", [](const std::string& path) {
    OnnxProgram r;
    {
      nb::gil_scoped_release released;
      r = compile_onnx(path);
    }
    return nb::make_tuple(nb::cast(std::move(r.program)), r.output_names, r.imported);
  });
}

}  // namespace tj::py
