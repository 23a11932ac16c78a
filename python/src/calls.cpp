#include "calls.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>

#include "proxy.h"
#include "tensorjit/compile.h"
#include "tensorjit/error.h"

namespace tj::py {

namespace {

std::vector<NDArray> views(const nb::list& arrays) {
  std::vector<NDArray> r;
  r.reserve(arrays.size());
  size_t i = 0;
  for (nb::handle a : arrays) r.push_back(as_array(a, "array argument " + std::to_string(i++)));
  return r;
}

std::vector<JitValue> values_of(const nb::list& values) {
  std::vector<JitValue> r;
  r.reserve(values.size());
  for (nb::handle v : values) {
    if (nb::isinstance<nb::bool_>(v)) {
      r.emplace_back(nb::cast<bool>(v));
    } else if (nb::isinstance<nb::int_>(v)) {
      int64_t i = 0;
      if (!nb::try_cast(v, i)) throw Error("an int argument (" + nb::cast<std::string>(nb::str(v)) + ") does not fit in 64 bits");
      r.emplace_back(i);
    } else {
      r.emplace_back(nb::cast<double>(v));
    }
  }
  return r;
}

std::vector<InputMemory> memory_of(const std::vector<NDArray>& in) {
  std::vector<InputMemory> r;
  r.reserve(in.size());
  for (const NDArray& a : in) r.push_back({a.raw(), a.dtype(), a.shape()});
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

// The fast path, the base class of tensorjit.jit's JitFunction: its
// __call__ is this class's. Python's slow path (JitFunction._call) teaches
// it each argument structure it can take: per positional argument, then
// per keyword argument (by name, in the call's order), a kind (a numpy
// array; a float, an int or a bool; a frozen weight or flat container of
// weights, by identity; a constant None or string; a dict, list or tuple of
// arrays), the C++ JIT of that structure, and per compiled entry the output
// structure. A call whose arguments match a structure is converted here and
// run if a compiled entry's guards pass; anything else (a miss, a new
// structure) goes to the slow path.
class FastCalls {
 public:
  enum Kind { kArray = 0, kFloat = 1, kInt = 2, kBool = 3, kFrozen = 4, kConst = 5, kArrays = 6 };
  enum Form { kOne = 0, kTuple = 1, kList = 2, kOther = 3 };

  explicit FastCalls(nb::callable unflatten) : unflatten_(std::move(unflatten)) {}

  // `kinds`: per positional argument, then per keyword argument in the
  // call's order.
  void learn(const nb::tuple& args, const nb::dict& kwargs, const std::vector<int>& kinds, nb::object jit, int entry, nb::object spec,
             int form) {
    if (kinds.size() != args.size() + kwargs.size() || entry < 0 || form < kOne || form > kOther) return;
    std::vector<PyObject*> xs = flat(args, kwargs);
    std::vector<nb::object> names;
    for (auto [k, v] : kwargs) names.push_back(nb::borrow(k));
    std::vector<Arg> rule;
    for (size_t i = 0; i < kinds.size(); ++i) {
      Arg a{kinds[i], {}, {}, {}};
      nb::handle x = xs[i];
      if (a.kind == kArrays) {  // its type and keys (or length)
        a.obj = nb::borrow(reinterpret_cast<PyObject*>(Py_TYPE(x.ptr())));
        if (PyDict_CheckExact(x.ptr())) {
          PyObject *k, *v;
          Py_ssize_t pos = 0;
          while (PyDict_Next(x.ptr(), &pos, &k, &v)) a.keys.push_back(nb::borrow(k));
        } else {
          a.keys.resize(nb::len(x));
        }
      } else if (a.kind == kFrozen || a.kind == kConst) {
        a.obj = nb::borrow(x);
        if (PyDict_CheckExact(x.ptr())) {
          PyObject *k, *v;
          Py_ssize_t pos = 0;
          while (PyDict_Next(x.ptr(), &pos, &k, &v)) a.keys.push_back(nb::borrow(k)), a.items.push_back(nb::borrow(v));
        } else if (PyList_CheckExact(x.ptr()) || PyTuple_CheckExact(x.ptr())) {
          for (nb::handle v : x) a.items.push_back(nb::borrow(v));
        }
      }
      rule.push_back(std::move(a));
    }
    Jit* cpp = nb::cast<Jit*>(jit);
    Structure* s = nullptr;
    for (Structure& t : structures_)
      if (t.cpp == cpp && same_rule(t.args, rule) && same_names(t.names, names)) s = &t;
    if (!s) {
      if (structures_.size() >= kMaxStructures) structures_.erase(structures_.begin());
      size_t arrays = 0;
      for (const Arg& a : rule) arrays += a.kind == kArray ? 1 : a.kind == kArrays ? a.keys.size() : 0;
      structures_.push_back({std::move(rule), std::move(names), arrays, jit, cpp, {}});
      s = &structures_.back();
    }
    if (s->outputs.size() <= static_cast<size_t>(entry)) s->outputs.resize(static_cast<size_t>(entry) + 1);
    s->outputs[static_cast<size_t>(entry)] = {std::move(spec), form};
  }

  // The call: here, or (None from run) on the slow path.
  static nb::object call(nb::pointer_and_handle<FastCalls> self, const nb::args& args, const nb::kwargs& kwargs) {
    FastCalls& f = *self.p;
    if (!f.structures_.empty()) {
      std::vector<PyObject*> xs = flat(args, kwargs);
      for (Structure& s : f.structures_)
        if (f.matches(s, xs, kwargs)) {
          nb::object r = f.run(s, xs);
          if (r.is_valid()) return r;
          break;
        }
    }
    return self.h.attr("_call")(*args, **kwargs);
  }

  void clear() { structures_.clear(); }

 private:
  static constexpr size_t kMaxStructures = 8;

  struct Arg {
    int kind;
    nb::object obj;                       // kFrozen, kConst: the object
    std::vector<nb::object> keys, items;  // a frozen dict's keys and values, a list's or tuple's items
  };
  struct Output {
    nb::object spec;
    int form = kOther;
  };
  struct Structure {
    std::vector<Arg> args;          // positional, then keyword
    std::vector<nb::object> names;  // the keyword arguments' names, in the call's order
    size_t arrays = 0;              // arrays in all
    nb::object jit;  // keeps `cpp` alive
    Jit* cpp;
    std::vector<Output> outputs;  // per entry of the C++ JIT
  };

  // The positional arguments, then the keyword arguments' values in order.
  static std::vector<PyObject*> flat(const nb::tuple& args, const nb::dict& kwargs) {
    std::vector<PyObject*> xs;
    xs.reserve(args.size() + kwargs.size());
    for (nb::handle a : args) xs.push_back(a.ptr());
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs.ptr(), &pos, &k, &v)) xs.push_back(v);
    return xs;
  }

  static bool same_name(PyObject* a, PyObject* b) {
    return a == b || (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b) && PyUnicode_Compare(a, b) == 0);
  }
  static bool same_names(const std::vector<nb::object>& a, const std::vector<nb::object>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!same_name(a[i].ptr(), b[i].ptr())) return false;
    return true;
  }

  static bool same_rule(const std::vector<Arg>& a, const std::vector<Arg>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].kind != b[i].kind || a[i].obj.ptr() != b[i].obj.ptr() || a[i].items.size() != b[i].items.size()) return false;
      for (size_t k = 0; k < a[i].items.size(); ++k)
        if (a[i].items[k].ptr() != b[i].items[k].ptr()) return false;
      for (size_t k = 0; k < a[i].keys.size(); ++k)
        if (a[i].keys[k].ptr() != b[i].keys[k].ptr()) return false;
    }
    return true;
  }

  // A frozen argument: the same object holding the same items (a weight
  // replaced in a dict is a new compilation, as on the slow path).
  static bool same_frozen(const Arg& a, PyObject* x) {
    if (x != a.obj.ptr()) return false;
    if (PyDict_CheckExact(x)) {
      if (PyDict_GET_SIZE(x) != static_cast<Py_ssize_t>(a.items.size())) return false;
      PyObject *k, *v;
      Py_ssize_t pos = 0;
      for (size_t i = 0; PyDict_Next(x, &pos, &k, &v); ++i)
        if (k != a.keys[i].ptr() || v != a.items[i].ptr()) return false;
      return true;
    }
    if (PyList_CheckExact(x)) {
      if (PyList_GET_SIZE(x) != static_cast<Py_ssize_t>(a.items.size())) return false;
      for (size_t i = 0; i < a.items.size(); ++i)
        if (PyList_GET_ITEM(x, static_cast<Py_ssize_t>(i)) != a.items[i].ptr()) return false;
    }
    return true;  // an array, or a tuple (immutable)
  }

  // A dict of arrays with the same keys in the same order, or a list or
  // tuple of as many arrays.
  bool same_arrays(const Arg& a, PyObject* x) const {
    if (reinterpret_cast<PyObject*>(Py_TYPE(x)) != a.obj.ptr()) return false;
    auto is_array = [](PyObject* v) { return Py_TYPE(v) == numpy_array_type(); };
    const auto n = static_cast<Py_ssize_t>(a.keys.size());
    if (PyDict_CheckExact(x)) {
      if (PyDict_GET_SIZE(x) != n) return false;
      PyObject *k, *v;
      Py_ssize_t pos = 0;
      for (size_t i = 0; PyDict_Next(x, &pos, &k, &v); ++i) {
        PyObject* want = a.keys[i].ptr();
        if (!is_array(v)) return false;
        if (k != want && !(PyUnicode_CheckExact(k) && PyUnicode_CheckExact(want) && PyUnicode_Compare(k, want) == 0)) return false;
      }
      return true;
    }
    PyObject* fast = x;  // an exact list or tuple (its type was checked)
    if (PySequence_Fast_GET_SIZE(fast) != n) return false;
    for (Py_ssize_t i = 0; i < n; ++i)
      if (!is_array(PySequence_Fast_GET_ITEM(fast, i))) return false;
    return true;
  }

  bool matches(const Structure& s, const std::vector<PyObject*>& xs, const nb::dict& kwargs) const {
    const std::vector<Arg>& rule = s.args;
    if (rule.size() != xs.size() || s.names.size() != kwargs.size()) return false;
    {
      PyObject *k, *v;
      Py_ssize_t pos = 0;
      for (size_t i = 0; PyDict_Next(kwargs.ptr(), &pos, &k, &v); ++i)
        if (!same_name(k, s.names[i].ptr())) return false;
    }
    for (size_t i = 0; i < rule.size(); ++i) {
      PyObject* x = xs[i];
      switch (rule[i].kind) {
        case kArray: if (Py_TYPE(x) != numpy_array_type()) return false; break;
        case kFloat: if (!PyFloat_CheckExact(x)) return false; break;
        case kInt: if (!PyLong_CheckExact(x)) return false; break;
        case kBool: if (!PyBool_Check(x)) return false; break;
        case kFrozen: if (!same_frozen(rule[i], x)) return false; break;
        case kArrays: if (!same_arrays(rule[i], x)) return false; break;
        case kConst:
          if (x != rule[i].obj.ptr() &&
              !(PyUnicode_CheckExact(x) && PyUnicode_CheckExact(rule[i].obj.ptr()) && PyUnicode_Compare(x, rule[i].obj.ptr()) == 0))
            return false;
          break;
        default: return false;
      }
    }
    return true;
  }

  // The results, or no object (not valid) when the slow path must take the call.
  nb::object run(Structure& s, const std::vector<PyObject*>& xs) {
    std::vector<NDArray> in;
    std::vector<JitValue> vals;
    std::vector<nb::handle> objects;
    in.reserve(s.arrays);
    objects.reserve(s.arrays);
    auto add = [&](PyObject* x) {
      NDArray v;
      if (!numpy_view(x, &v)) return false;
      in.push_back(std::move(v));
      objects.push_back(x);
      return true;
    };
    for (size_t i = 0; i < s.args.size(); ++i) {
      PyObject* x = xs[i];
      switch (s.args[i].kind) {
        case kArray:
          if (!add(x)) return {};
          break;
        case kArrays:
          if (PyDict_CheckExact(x)) {
            PyObject *k, *v;
            Py_ssize_t pos = 0;
            while (PyDict_Next(x, &pos, &k, &v))
              if (!add(v)) return {};
          } else {
            for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(x); ++j)
              if (!add(PySequence_Fast_GET_ITEM(x, j))) return {};
          }
          break;
        case kFloat: vals.emplace_back(PyFloat_AS_DOUBLE(x)); break;
        case kInt: {
          int overflow = 0;
          long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
          if (overflow) return {};
          vals.emplace_back(static_cast<int64_t>(v));
          break;
        }
        case kBool: vals.emplace_back(x == Py_True); break;
        default: break;
      }
    }
    std::vector<InputMemory> memory = memory_of(in);
    std::vector<NDArray> out;
    int entry;
    {
      nb::gil_scoped_release released;
      std::lock_guard<std::recursive_mutex> hold(s.cpp->lock);
      entry = s.cpp->f.call_cached(std::move(in), vals, out);
    }
    if (entry < 0) return {};
    if (static_cast<size_t>(entry) >= s.outputs.size() || !s.outputs[static_cast<size_t>(entry)].spec.is_valid())
      throw Error("tensorjit.jit: entry " + std::to_string(entry) + " ran with no output structure recorded");
    const Output& o = s.outputs[static_cast<size_t>(entry)];
    nb::list r = results(std::move(out), memory, objects);
    switch (o.form) {
      case kOne: return r[0];
      case kTuple: return nb::tuple(r);
      case kList: return r;
      default: return unflatten_(o.spec, r);
    }
  }

  nb::callable unflatten_;
  std::vector<Structure> structures_;
};

// f(j.f), with the GIL released and the JIT held.
template <class F>
auto locked(Jit& j, F f) {
  nb::gil_scoped_release released;
  std::lock_guard<std::recursive_mutex> hold(j.lock);
  return f(j.f);
}

nb::dict stats_dict(const JitStats& s) {
  nb::dict d;
  d["calls"] = s.calls, d["hits"] = s.hits, d["compilations"] = s.compilations, d["eager_calls"] = s.eager_calls;
  d["graph_breaks"] = s.graph_breaks, d["graphs_run"] = s.graphs_run, d["compile_seconds"] = s.compile_seconds;
  return d;
}

}  // namespace

nb::list results(std::vector<NDArray>&& outs, const std::vector<InputMemory>& in, const std::vector<nb::handle>& objects) {
  nb::list r;
  for (NDArray& a : outs) {
    if (a.is_view()) {
      bool same = false;
      for (size_t k = 0; k < in.size() && k < objects.size() && !same; ++k)
        if (in[k].data == a.raw() && in[k].dtype == a.dtype() && in[k].shape == a.shape()) {
          r.append(objects[k]);
          same = true;
        }
      if (same) continue;
      a = NDArray::copy_of(a.dtype(), a.shape(), a.raw(), a.nbytes());
    }
    r.append(to_numpy(std::move(a)));
  }
  return r;
}

void bind_calls(nb::module_& m) {
  nb::class_<Jit>(m, "_JitFunction")
      .def("__init__",
           [](Jit* self, std::string name, const std::string& policy, std::vector<std::vector<int64_t>> dims,
              int64_t bucket_multiple, size_t cache_limit, bool compile, std::vector<size_t> grad_wrt, const std::string& weights,
              const std::string& device) {
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
             o.grad_wrt = std::move(grad_wrt);
             o.weights = weights_format(weights);
             o.device = device;
             new (self) Jit{JitFunction(std::move(name), traced(), o), {}};
           },
           nb::arg("name"), nb::arg("policy"), nb::arg("dims"), nb::arg("bucket_multiple"), nb::arg("cache_limit"), nb::arg("compile"),
           nb::arg("grad_wrt") = std::vector<size_t>{}, nb::arg("weights") = "f32", nb::arg("device") = "")
      // The slow path: arguments flattened by Python. Tensors are given up
      // (donated caches come back as their arrays, not copies). Returns the
      // results and the entry that ran (-1: a fresh trace ran).
      .def("__call__", [](Jit& j, nb::callable fn, const nb::list& tensors, const nb::list& values) {
        std::vector<NDArray> in = views(tensors);
        std::vector<InputMemory> memory = memory_of(in);
        std::vector<nb::handle> objects(tensors.begin(), tensors.end());
        std::vector<JitValue> vals = values_of(values);
        std::vector<NDArray> out;
        int entry = -1;
        PyObject* outer = g_traced;
        g_traced = fn.ptr();
        try {
          nb::gil_scoped_release released;  // retaken by the traced function on a miss
          std::lock_guard<std::recursive_mutex> hold(j.lock);
          out = j.f(std::move(in), vals);
          entry = j.f.last_entry();
        } catch (...) {
          g_traced = outer;
          throw;
        }
        g_traced = outer;
        return nb::make_tuple(results(std::move(out), memory, objects), entry);
      })
      // The same call made from C++, `n` times on arguments converted once
      // (as a C++ decode loop makes it: the tensors given up, so donated
      // caches are not copied): the baseline of bench/python_overhead.py.
      // Seconds per call.
      .def("_time_calls", [](Jit& j, const nb::list& tensors, const nb::list& values, size_t n) {
        const std::vector<NDArray> in = views(tensors);
        const std::vector<JitValue> vals = values_of(values);
        std::vector<double> seconds;
        seconds.reserve(n);
        nb::gil_scoped_release released;
        std::lock_guard<std::recursive_mutex> hold(j.lock);
        for (size_t i = 0; i < n; ++i) {
          auto t0 = std::chrono::steady_clock::now();
          std::vector<NDArray> args = in;
          std::vector<NDArray> out = j.f(std::move(args), vals);
          seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        return seconds;
      })
      .def("explain", [](Jit& j) { return locked(j, [](JitFunction& f) { return f.explain(); }); })
      // explain()'s content as data (tensorjit.explain formats it, with the
      // Python file and line of each graph break instead of the binding's).
      .def("explanation", [](Jit& j) {
        const JitExplanation x = locked(j, [](JitFunction& f) { return f.explanation(); });
        nb::dict d = stats_dict(x.stats);
        d["name"] = x.name, d["cache_limit"] = x.cache_limit, d["breaks_graph"] = x.breaks_graph, d["distinct_graphs"] = x.distinct_graphs;
        nb::list entries;
        for (const auto& e : x.entries) {
          nb::dict entry;
          entry["id"] = e.id, entry["compiled_at"] = e.compiled_at, entry["guards"] = e.guards;
          entries.append(entry);
        }
        d["entries"] = entries, d["history"] = x.history, d["dropped_notes"] = x.dropped_notes;
        return d;
      })
      .def_prop_ro("stats", [](Jit& j) { return stats_dict(locked(j, [](JitFunction& f) { return f.stats(); })); });

  // The kinds of argument and forms of result that tensorjit/_jit.py hands
  // the fast path: defined here (FastCalls::Kind, ::Form), read there.
  nb::dict kinds, forms;
  kinds["array"] = int(FastCalls::kArray), kinds["float"] = int(FastCalls::kFloat), kinds["int"] = int(FastCalls::kInt);
  kinds["bool"] = int(FastCalls::kBool), kinds["frozen"] = int(FastCalls::kFrozen), kinds["const"] = int(FastCalls::kConst);
  kinds["arrays"] = int(FastCalls::kArrays);
  forms["one"] = int(FastCalls::kOne), forms["tuple"] = int(FastCalls::kTuple), forms["list"] = int(FastCalls::kList);
  forms["other"] = int(FastCalls::kOther);
  m.attr("_FAST_ARG_KINDS") = kinds;
  m.attr("_FAST_RESULT_FORMS") = forms;
  nb::class_<FastCalls>(m, "_FastCalls")
      .def(nb::init<nb::callable>())
      .def("_learn", &FastCalls::learn)
      .def("__call__", &FastCalls::call)
      .def("_forget", &FastCalls::clear);
}

}  // namespace tj::py
