// The numpy-style functions of the tensorjit namespace, over proxies.
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include "proxy.h"
#include "tensorjit/error.h"

namespace tj::py {

namespace {

Tracer& current_tracer(const char* what) {
  TraceScope* s = TraceScope::current();
  if (!s || !s->tracer()) throw Error(std::string(what) + " is only available while a function is traced (under tensorjit.jit)");
  return *s->tracer();
}

// A region's function (cond, while_loop) called from C++ with the region's
// tensors: the proxies it makes end with it. `unpack`: the tensors as
// separate arguments (cond's operands, as jax.lax.cond); else one list
// (while_loop's state).
StateFn state_fn(nb::callable f, Tracer* outer, bool unpack) {
  return [f, outer, unpack](const std::vector<Tensor>& xs) {
    TraceScope scope(xs.empty() ? outer : xs[0].tracer());
    nb::object args = nb::cast(wrap_all(xs));
    nb::object r = unpack ? f(*args) : f(args);
    if (nb::isinstance<Proxy>(r)) return std::vector<Tensor>{nb::cast<Proxy>(r).get()};
    return unwrap_all(nb::cast<std::vector<Proxy>>(r));
  };
}

// The traced tensor among two operands (the other may be a number or an
// array, made a constant of its trace).
const Tensor& like_of(const Operand& a, const Operand& b, const char* what) {
  const Proxy* p = std::get_if<Proxy>(&a);
  if (!p) p = std::get_if<Proxy>(&b);
  if (!p) throw Error(std::string(what) + ": at least one operand must be a traced tensor");
  return p->get();
}

// A dim from an int or its text ("T", "2*T").
Dim dim_of(nb::handle h) {
  if (nb::isinstance<nb::str>(h)) return Dim::parse(nb::cast<std::string>(h));
  return Dim(nb::cast<int64_t>(h));
}

Shape dims_of(nb::handle h) {
  Shape s;
  for (nb::handle e : h) s.push_back(dim_of(e));
  return s;
}

}  // namespace

void bind_ops(nb::module_& m) {
#define TJ_UNARY(name) m.def(#name, [](const Proxy& x) { return wrap(tj::name(x.get())); }, nb::arg("x"))
  TJ_UNARY(exp);
  TJ_UNARY(log);
  TJ_UNARY(tanh);
  TJ_UNARY(sqrt);
  TJ_UNARY(rsqrt);
  TJ_UNARY(sin);
  TJ_UNARY(cos);
  TJ_UNARY(abs);
  TJ_UNARY(sigmoid);
  TJ_UNARY(erf);
  TJ_UNARY(floor);
  TJ_UNARY(ceil);
  TJ_UNARY(round);
  TJ_UNARY(sign);
  TJ_UNARY(log1p);
  TJ_UNARY(expm1);
  TJ_UNARY(relu);
  TJ_UNARY(silu);
  TJ_UNARY(softplus);
  TJ_UNARY(hardswish);
  TJ_UNARY(logical_not);
  TJ_UNARY(tan);
  TJ_UNARY(asin);
  TJ_UNARY(acos);
  TJ_UNARY(atan);
  TJ_UNARY(sinh);
  TJ_UNARY(cosh);
  TJ_UNARY(asinh);
  TJ_UNARY(acosh);
  TJ_UNARY(atanh);
  TJ_UNARY(trunc);
  TJ_UNARY(bitwise_not);
#undef TJ_UNARY
  m.def("negative", [](const Proxy& x) { return wrap(neg(x.get())); });
  m.def("reciprocal", [](const Proxy& x) { return wrap(recip(x.get())); });
  m.def("gelu", [](const Proxy& x, bool approximate) { return wrap(gelu(x.get(), approximate)); }, nb::arg("x"), nb::arg("approximate") = true);
  m.def("leaky_relu", [](const Proxy& x, double alpha) { return wrap(leaky_relu(x.get(), alpha)); }, nb::arg("x"), nb::arg("alpha") = 0.01);
#define TJ_BINARY(name, expr)                           \
  m.def(#name, [](const Operand& a, const Operand& b) { \
    const Tensor& like = like_of(a, b, #name);          \
    Tensor x = operand(a, like), y = operand(b, like);  \
    return wrap(expr);                                  \
  })
  TJ_BINARY(add, x + y);
  TJ_BINARY(subtract, x - y);
  TJ_BINARY(multiply, x * y);
  TJ_BINARY(divide, x / y);
  TJ_BINARY(power, pow(x, y));
  TJ_BINARY(maximum, maximum(x, y));
  TJ_BINARY(minimum, minimum(x, y));
  TJ_BINARY(matmul, matmul(x, y));
  TJ_BINARY(equal, eq(x, y));
  TJ_BINARY(not_equal, ne(x, y));
  TJ_BINARY(less, lt(x, y));
  TJ_BINARY(less_equal, le(x, y));
  TJ_BINARY(greater, gt(x, y));
  TJ_BINARY(greater_equal, ge(x, y));
  TJ_BINARY(logical_and, logical_and(x, y));
  TJ_BINARY(logical_or, logical_or(x, y));
  TJ_BINARY(mod, mod(x, y));
  TJ_BINARY(fmod, mod(x, y, true));
  TJ_BINARY(arctan2, atan2(x, y));
  TJ_BINARY(bitwise_and, bitwise_and(x, y));
  TJ_BINARY(bitwise_or, bitwise_or(x, y));
  TJ_BINARY(bitwise_xor, bitwise_xor(x, y));
  TJ_BINARY(left_shift, shift_left(x, y));
  TJ_BINARY(right_shift, shift_right(x, y));
#undef TJ_BINARY
  m.def("where", [](const Proxy& c, const Operand& a, const Operand& b) {
    const Tensor& like = like_of(a, b, "where");
    return wrap(where(c.get(), operand(a, like), operand(b, like)));
  });
  m.def("clip", [](const Proxy& x, const Operand& lo, const Operand& hi) {
    const Tensor& t = x.get();
    return wrap(clip(t, operand(lo, t), operand(hi, t)));
  });
  m.def("concatenate", [](const std::vector<Proxy>& xs, int64_t axis) { return wrap(concat(unwrap_all(xs), axis)); }, nb::arg("xs"),
        nb::arg("axis") = 0);
  m.def("stack", [](const std::vector<Proxy>& xs, int64_t axis) {
    std::vector<Tensor> parts;
    for (const Proxy& p : xs) parts.push_back(unsqueeze(p.get(), {axis}));
    return wrap(concat(parts, axis));
  }, nb::arg("xs"), nb::arg("axis") = 0);
  m.def("take", [](const Proxy& x, const Proxy& idx, int64_t axis) { return wrap(gather(x.get(), idx.get(), axis)); }, nb::arg("x"),
        nb::arg("indices"), nb::arg("axis") = 0);
  // np.add.at(base, indices, updates) on a copy: base with each slice of
  // updates added at its index along the axis (floats).
  m.def("scatter_add", [](const Proxy& base, const Proxy& idx, const Proxy& updates, int64_t axis) {
    return wrap(scatter_add(base.get(), idx.get(), updates.get(), axis));
  }, nb::arg("base"), nb::arg("indices"), nb::arg("updates"), nb::arg("axis") = 0);
  m.def("softmax", [](const Proxy& x, int64_t axis) { return wrap(softmax(x.get(), axis)); }, nb::arg("x"), nb::arg("axis") = -1);
  m.def("log_softmax", [](const Proxy& x, int64_t axis) {
    const Tensor& t = x.get();
    Tensor shifted = t - amax(t, {axis}, true);
    return wrap(shifted - log(sum(exp(shifted), {axis}, true)));
  }, nb::arg("x"), nb::arg("axis") = -1);
  m.def("layer_norm", [](const Proxy& x, const Proxy& w, const Proxy& b, double eps) { return wrap(layer_norm(x.get(), w.get(), b.get(), eps)); },
        nb::arg("x"), nb::arg("weight"), nb::arg("bias"), nb::arg("eps") = 1e-5);
  m.def("rms_norm", [](const Proxy& x, const Proxy& w, double eps) { return wrap(rms_norm(x.get(), w.get(), eps)); }, nb::arg("x"),
        nb::arg("weight"), nb::arg("eps") = 1e-5);
  m.def("expand_dims", [](const Proxy& x, std::vector<int64_t> axes) { return wrap(unsqueeze(x.get(), axes)); });
  m.def("squeeze", [](const Proxy& x, std::vector<int64_t> axes) { return wrap(squeeze(x.get(), axes)); });
  m.def("broadcast_to", [](const Proxy& x, nb::handle shape) { return wrap(expand(x.get(), dims_of(shape))); });
  m.def("swapaxes", [](const Proxy& x, int64_t a, int64_t b) { return wrap(transpose(x.get(), a, b)); });
  m.def("argmax", [](const Proxy& x, int64_t axis, bool keepdims) { return wrap(argmax(x.get(), axis, keepdims)); }, nb::arg("x"),
        nb::arg("axis"), nb::arg("keepdims") = false);
  // n: an int, or a symbolic size as x.shape gives it ("T").
  m.def("arange", [](nb::handle n, const std::string& dtype) {
    Dim d = nb::isinstance<nb::str>(n) ? Dim::parse(nb::cast<std::string>(n)) : Dim(nb::cast<int64_t>(n));
    auto dt = parse_dtype(dtype);
    if (!dt) throw Error("arange: unknown dtype '" + dtype + "'");
    return wrap(iota(current_tracer("tensorjit.arange"), d, *dt));
  }, nb::arg("n"), nb::arg("dtype") = "i64");
  // Sizes that may be symbolic (a dim's text, as x.shape gives it): what the
  // torch backend's rows need for SymInt graphs.
  m.def("full", [](nb::handle shape, double value, const std::string& dtype) {
    auto dt = parse_dtype(dtype);
    if (!dt) throw Error("full: unknown dtype '" + dtype + "'");
    return wrap(expand(current_tracer("tensorjit.full").scalar(value, *dt), dims_of(shape)));
  }, nb::arg("shape"), nb::arg("value"), nb::arg("dtype"));
  m.def("slice_axis", [](const Proxy& x, int64_t axis, nb::handle start, nb::handle end, int64_t step) {
    return wrap(slice(x.get(), axis, dim_of(start), dim_of(end), step));
  }, nb::arg("x"), nb::arg("axis"), nb::arg("start"), nb::arg("end"), nb::arg("step") = 1);
  m.def("dim_value", [](nb::handle d, const std::string& dtype) {
    Tracer& t = current_tracer("tensorjit.dim_value");
    Dim dim = dim_of(d);
    auto dt = parse_dtype(dtype);
    if (!dt) throw Error("dim_value: unknown dtype '" + dtype + "'");
    Tensor v = dim.as_const() ? t.scalar(static_cast<double>(*dim.as_const()), DType::i64) : sum(expand(t.scalar(1, DType::i64), {dim}), {0});
    return wrap(*dt == DType::i64 ? v : cast(v, *dt));
  }, nb::arg("d"), nb::arg("dtype") = "i64", "A dim's value as a scalar tensor (computed at run time when symbolic).");
  // Arithmetic on dims: an int when the result is constant, else its text.
  m.def("dim_arith", [](const std::string& op, nb::handle a, nb::handle b) -> nb::object {
    Dim x = dim_of(a), y = dim_of(b), r;
    if (op == "add") r = x + y;
    else if (op == "sub") r = x - y;
    else if (op == "mul") r = x * y;
    else if (op == "floordiv" || op == "truediv") {
      auto q = x.div_exact(y);
      if (!q) {
        auto xc = x.as_const(), yc = y.as_const();
        if (!xc || !yc || *yc == 0) throw UnsupportedOperand("a symbolic size " + x.str() + " divided by " + y.str() + " (only exact division of sizes is supported)");
        int64_t qq = *xc / *yc;
        if ((*xc % *yc != 0) && ((*xc < 0) != (*yc < 0))) --qq;
        r = Dim(qq);
      } else {
        r = *q;
      }
    } else if (op == "mod") {
      auto xc = x.as_const(), yc = y.as_const();
      if (x.div_exact(y)) r = Dim(0);
      else if (xc && yc && *yc != 0) r = Dim(((*xc % *yc) + *yc) % *yc);
      else throw UnsupportedOperand("a symbolic size " + x.str() + " mod " + y.str());
    } else {
      throw Error("dim_arith: unknown op '" + op + "'");
    }
    if (auto c = r.as_const()) return nb::int_(*c);
    return nb::str(r.str().c_str());
  });
  m.def("asarray", [](nb::handle a) { return wrap(current_tracer("tensorjit.asarray").constant(as_array(a, "asarray"))); });
  m.def("causal_mask", [](const Proxy& offset, int64_t q, int64_t k) { return wrap(causal_mask(offset.get(), Dim(q), Dim(k))); });
  m.def("kv_write", [](const Proxy& cache, const Proxy& rows, const Proxy& pos, int64_t axis) {
    return wrap(kv_write(cache.get(), rows.get(), pos.get(), axis));
  }, nb::arg("cache"), nb::arg("rows"), nb::arg("pos"), nb::arg("axis") = 2);
  m.def("flash_attention", [](const Proxy& q, const Proxy& k, const Proxy& v, double scale, std::optional<Proxy> offset) {
    if (offset) return wrap(flash_attn_causal(q.get(), k.get(), v.get(), offset->get(), scale));
    return wrap(flash_attn(q.get(), k.get(), v.get(), scale));
  }, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("scale"), nb::arg("causal_offset") = nb::none());
  // Structured control flow: one graph, no graph break (as jax.lax's):
  // cond's branches take the operands as arguments, while_loop's functions
  // the state as one list; each returns tensors (a list, or one tensor).
  m.def("cond", [](const Proxy& pred, nb::callable then_fn, nb::callable else_fn, const std::vector<Proxy>& operands) {
    Tracer* outer = pred.get().tracer();
    return wrap_all(cond(pred.get(), state_fn(then_fn, outer, true), state_fn(else_fn, outer, true), unwrap_all(operands)));
  });
  m.def("while_loop", [](nb::callable cond_fn, nb::callable body, const std::vector<Proxy>& init) {
    if (init.empty()) throw Error("while_loop needs at least one state tensor");
    Tracer* outer = init[0].get().tracer();
    auto c = [cond_fn, outer](const std::vector<Tensor>& xs) {
      TraceScope scope(xs.empty() ? outer : xs[0].tracer());
      return nb::cast<Proxy>(cond_fn(nb::cast(wrap_all(xs)))).get();
    };
    return wrap_all(while_loop(c, state_fn(body, outer, false), unwrap_all(init)));
  });
}

}  // namespace tj::py
