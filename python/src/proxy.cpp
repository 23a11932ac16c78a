#include "proxy.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <numeric>

#include "tensorjit/error.h"

namespace tj::py {

namespace {

thread_local TraceScope* g_scope = nullptr;

}  // namespace

const Tensor& Proxy::get() const {
  if (!t || !t->defined())
    throw Error("this tensor proxy belongs to a trace that has ended: return it from the traced function instead of keeping it");
  return *t;
}

TraceScope::TraceScope(Tracer* tracer) : tracer_(tracer), outer_(g_scope) { g_scope = this; }

TraceScope::~TraceScope() {
  for (auto& w : made_)
    if (auto t = w.lock()) *t = Tensor();  // let go of the tracer before it goes
  g_scope = outer_;
}

TraceScope* TraceScope::current() { return g_scope; }

Proxy wrap(Tensor t) {
  auto p = std::make_shared<Tensor>(std::move(t));
  if (g_scope) g_scope->add(p);
  return {p};
}

std::vector<Proxy> wrap_all(const std::vector<Tensor>& ts) {
  std::vector<Proxy> r;
  for (const Tensor& t : ts) r.push_back(wrap(t));
  return r;
}

std::vector<Tensor> unwrap_all(const std::vector<Proxy>& ps) {
  std::vector<Tensor> r;
  for (const Proxy& p : ps) r.push_back(p.get());
  return r;
}

Tensor operand(const Operand& o, const Tensor& like) {
  if (auto* p = std::get_if<Proxy>(&o)) return p->get();
  if (auto* d = std::get_if<double>(&o)) return like.tracer()->scalar(*d, like.dtype());
  return like.tracer()->constant(view_of(std::get<AnyArray>(o), "a constant array"));
}

namespace {

std::vector<int64_t> axes_of(const Tensor& x, const std::optional<std::variant<int64_t, std::vector<int64_t>>>& axis) {
  std::vector<int64_t> r;
  if (!axis) {
    r.resize(static_cast<size_t>(x.rank()));
    std::iota(r.begin(), r.end(), 0);
  } else if (auto* a = std::get_if<int64_t>(&*axis)) {
    r.push_back(*a);
  } else {
    r = std::get<std::vector<int64_t>>(*axis);
  }
  for (int64_t& a : r) {
    if (a < -x.rank() || a >= x.rank()) throw ShapeError("axis " + std::to_string(a) + " is out of range for " + x.type().str());
    if (a < 0) a += x.rank();
  }
  return r;
}

using Axis = std::optional<std::variant<int64_t, std::vector<int64_t>>>;

// The smallest element: -1 - max(-1 - x) for integers (exact, no overflow), -max(-x) for floats.
Tensor amin_(const Tensor& x, std::vector<int64_t> axes, bool keep) {
  if (is_float(x.dtype())) return neg(amax(neg(x), std::move(axes), keep));
  return -1.0 - amax(-1.0 - x, std::move(axes), keep);
}

nb::object dim_to_py(const Dim& d) {
  if (auto c = d.as_const()) return nb::int_(*c);
  return nb::str(d.str().c_str());
}

Shape shape_from(nb::handle obj) {
  Shape s;
  auto one = [&](nb::handle h) {
    if (nb::isinstance<nb::str>(h)) s.push_back(Dim::parse(nb::cast<std::string>(h)));
    else s.push_back(Dim(nb::cast<int64_t>(h)));
  };
  if (nb::isinstance<nb::tuple>(obj) || nb::isinstance<nb::list>(obj))
    for (nb::handle h : obj) one(h);
  else
    one(obj);
  return s;
}

// x[key]: ints, slices, ..., None and one integer-tensor index (a take
// along axis 0), as numpy reads them.
Tensor index(const Tensor& x, nb::handle key) {
  if (nb::isinstance<Proxy>(key)) return gather(x, nb::cast<Proxy>(key).get(), 0);
  std::vector<nb::handle> items;
  if (nb::isinstance<nb::tuple>(key))
    for (nb::handle h : key) items.push_back(h);
  else
    items.push_back(key);
  int consumed = 0;
  bool ellipsis = false;
  for (nb::handle h : items) {
    if (h.is(nb::ellipsis())) {
      if (ellipsis) throw Error("an index can only have a single ellipsis ('...')");
      ellipsis = true;
    } else if (!h.is_none()) {
      ++consumed;
    }
  }
  if (consumed > x.rank()) throw ShapeError("too many indices for " + x.type().str() + ": " + std::to_string(consumed));
  std::vector<Index> idx;
  std::vector<int64_t> new_axes;  // positions of None in the result
  int64_t out_axis = 0;
  for (nb::handle h : items) {
    if (h.is(nb::ellipsis())) {
      for (int i = 0; i < x.rank() - consumed; ++i, ++out_axis) idx.push_back(all);
    } else if (h.is_none()) {
      new_axes.push_back(out_axis++);
    } else if (nb::isinstance<nb::slice>(h)) {
      nb::object start = h.attr("start"), stop = h.attr("stop"), step = h.attr("step");
      Range r;
      r.start = start.is_none() ? Dim(0) : Dim(nb::cast<int64_t>(start));
      if (!stop.is_none()) r.end = Dim(nb::cast<int64_t>(stop));
      r.step = step.is_none() ? 1 : nb::cast<int64_t>(step);
      if (r.step <= 0) throw Error("slices with a step of " + std::to_string(r.step) + " are not supported (steps must be positive)");
      idx.push_back(r);
      ++out_axis;
    } else if (nb::isinstance<nb::int_>(h) && !nb::isinstance<nb::bool_>(h)) {
      idx.push_back(nb::cast<int64_t>(h));
    } else if (nb::isinstance<Proxy>(h)) {
      throw Error("a tensor index inside a tuple is not supported: use tensorjit.take(x, indices, axis)");
    } else {
      throw Error("unsupported index " + nb::cast<std::string>(nb::repr(h)) + " (ints, slices, ..., None and an integer tensor are)");
    }
  }
  Tensor r = idx.empty() ? x : x.index(idx);
  return new_axes.empty() ? r : unsqueeze(r, new_axes);
}

template <class F>
auto binop(F f) {
  return [f](const Proxy& a, const Operand& b) {
    const Tensor& x = a.get();
    return wrap(f(x, operand(b, x)));
  };
}

template <class F>
auto rbinop(F f) {
  return [f](const Proxy& a, const Operand& b) {
    const Tensor& x = a.get();
    return wrap(f(operand(b, x), x));
  };
}

// Python's floor division: floor(a / b) for floats; for integers the
// quotient rounded down, (a - mod(a, b)) / b.
Tensor floordiv(const Tensor& a, const Tensor& b) {
  if (is_float(a.dtype())) return floor(a / b);
  return (a - mod(a, b)) / b;
}

}  // namespace

void bind_proxy(nb::module_& m) {
  nb::class_<Proxy> t(m, "Tensor", "A value of the function being traced (a proxy: it holds no data).");
  t.def_prop_ro("dtype", [](const Proxy& p) { return std::string(dtype_name(p.get().dtype())); })
      .def_prop_ro("shape", [](const Proxy& p) {
        nb::list l;
        for (const Dim& d : p.get().shape()) l.append(dim_to_py(d));
        return nb::tuple(l);
      })
      .def_prop_ro("ndim", [](const Proxy& p) { return p.get().rank(); })
      .def_prop_ro("T", [](const Proxy& p) {
        const Tensor& x = p.get();
        std::vector<int64_t> perm(static_cast<size_t>(x.rank()));
        std::iota(perm.rbegin(), perm.rend(), 0);
        return wrap(permute(x, perm));
      })
      .def("__repr__", [](const Proxy& p) { return "tensorjit.Tensor(" + p.get().type().str() + ")"; })
      .def("__len__", [](const Proxy& p) {
        const Tensor& x = p.get();
        if (x.rank() == 0) throw Error("len() of a 0-d tensor");
        auto c = x.shape()[0].as_const();
        if (!c) throw Error("len() of a tensor whose first dim is symbolic (" + x.shape()[0].str() + "): use x.shape[0]");
        return *c;
      })
      // Reading a value is a graph break under tensorjit.jit (the C++ JIT's item()).
      .def("item", [](const Proxy& p) { return p.get().item(); })
      .def("__float__", [](const Proxy& p) { return p.get().item(); })
      .def("__int__", [](const Proxy& p) { return static_cast<int64_t>(p.get().item()); })
      .def("__bool__", [](const Proxy& p) { return p.get().item() != 0; })
      .def("__add__", binop([](const Tensor& a, const Tensor& b) { return a + b; }))
      .def("__radd__", rbinop([](const Tensor& a, const Tensor& b) { return a + b; }))
      .def("__sub__", binop([](const Tensor& a, const Tensor& b) { return a - b; }))
      .def("__rsub__", rbinop([](const Tensor& a, const Tensor& b) { return a - b; }))
      .def("__mul__", binop([](const Tensor& a, const Tensor& b) { return a * b; }))
      .def("__rmul__", rbinop([](const Tensor& a, const Tensor& b) { return a * b; }))
      .def("__truediv__", binop([](const Tensor& a, const Tensor& b) { return a / b; }))
      .def("__rtruediv__", rbinop([](const Tensor& a, const Tensor& b) { return a / b; }))
      .def("__floordiv__", binop(floordiv))
      .def("__rfloordiv__", rbinop(floordiv))
      .def("__mod__", binop([](const Tensor& a, const Tensor& b) { return mod(a, b); }))
      .def("__rmod__", rbinop([](const Tensor& a, const Tensor& b) { return mod(a, b); }))
      .def("__pow__", [](const Proxy& a, const Operand& b) {  // a Python number: tj::pow(Tensor, double)'s products
        if (auto* d = std::get_if<double>(&b)) return wrap(pow(a.get(), *d));
        return wrap(pow(a.get(), operand(b, a.get())));
      })
      .def("__rpow__", rbinop([](const Tensor& a, const Tensor& b) { return pow(a, b); }))
      .def("__matmul__", binop([](const Tensor& a, const Tensor& b) { return matmul(a, b); }))
      .def("__rmatmul__", rbinop([](const Tensor& a, const Tensor& b) { return matmul(a, b); }))
      .def("__lt__", binop([](const Tensor& a, const Tensor& b) { return lt(a, b); }))
      .def("__le__", binop([](const Tensor& a, const Tensor& b) { return le(a, b); }))
      .def("__gt__", binop([](const Tensor& a, const Tensor& b) { return gt(a, b); }))
      .def("__ge__", binop([](const Tensor& a, const Tensor& b) { return ge(a, b); }))
      .def("__eq__", binop([](const Tensor& a, const Tensor& b) { return eq(a, b); }))
      .def("__ne__", binop([](const Tensor& a, const Tensor& b) { return ne(a, b); }))
      .def("__and__", binop([](const Tensor& a, const Tensor& b) { return logical_and(a, b); }))
      .def("__or__", binop([](const Tensor& a, const Tensor& b) { return logical_or(a, b); }))
      .def("__xor__", binop([](const Tensor& a, const Tensor& b) { return ne(a, b); }))
      .def("__invert__", [](const Proxy& p) { return wrap(logical_not(p.get())); })
      .def("__neg__", [](const Proxy& p) { return wrap(neg(p.get())); })
      .def("__pos__", [](const Proxy& p) { return p; })
      .def("__abs__", [](const Proxy& p) { return wrap(abs(p.get())); })
      .def("__getitem__", [](const Proxy& p, nb::handle key) { return wrap(index(p.get(), key)); }, nb::arg("key").none())
      .def("reshape", [](const Proxy& p, nb::args shape) {
        return wrap(reshape(p.get(), shape.size() == 1 ? shape_from(shape[0]) : shape_from(shape)));
      })
      .def("transpose", [](const Proxy& p, nb::args axes) {
        const Tensor& x = p.get();
        std::vector<int64_t> perm;
        if (axes.size() == 1 && !nb::isinstance<nb::int_>(axes[0])) perm = nb::cast<std::vector<int64_t>>(axes[0]);
        else perm = nb::cast<std::vector<int64_t>>(axes);
        if (perm.empty()) {
          perm.resize(static_cast<size_t>(x.rank()));
          std::iota(perm.rbegin(), perm.rend(), 0);
        }
        return wrap(permute(x, perm));
      })
      .def("astype", [](const Proxy& p, nb::handle dt) {
        std::string name = nb::isinstance<nb::str>(dt) ? nb::cast<std::string>(dt) : nb::cast<std::string>(nb::str(nb::module_::import_("numpy").attr("dtype")(dt)));
        return wrap(cast(p.get(), dtype_from_name(name)));
      })
      .def("sum", [](const Proxy& p, Axis axis, bool keepdims) { return wrap(sum(p.get(), axes_of(p.get(), axis), keepdims)); },
           nb::arg("axis") = nb::none(), nb::arg("keepdims") = false)
      .def("mean", [](const Proxy& p, Axis axis, bool keepdims) { return wrap(mean(p.get(), axes_of(p.get(), axis), keepdims)); },
           nb::arg("axis") = nb::none(), nb::arg("keepdims") = false)
      .def("max", [](const Proxy& p, Axis axis, bool keepdims) { return wrap(amax(p.get(), axes_of(p.get(), axis), keepdims)); },
           nb::arg("axis") = nb::none(), nb::arg("keepdims") = false)
      .def("min", [](const Proxy& p, Axis axis, bool keepdims) { return wrap(amin_(p.get(), axes_of(p.get(), axis), keepdims)); },
           nb::arg("axis") = nb::none(), nb::arg("keepdims") = false)
      .def("prod", [](const Proxy& p, Axis axis, bool keepdims) { return wrap(prod(p.get(), axes_of(p.get(), axis), keepdims)); },
           nb::arg("axis") = nb::none(), nb::arg("keepdims") = false)
      .def("argmax", [](const Proxy& p, int64_t axis, bool keepdims) { return wrap(argmax(p.get(), axis, keepdims)); }, nb::arg("axis"),
           nb::arg("keepdims") = false);
  t.attr("__array_ufunc__") = nb::none();  // numpy defers array + proxy (and @) to the proxy's __radd__
  t.attr("__hash__") = nb::none();
}

}  // namespace tj::py
