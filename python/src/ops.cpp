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
#undef TJ_BINARY
  m.def("where", [](const Proxy& c, const Operand& a, const Operand& b) {
    const Tensor& like = like_of(a, b, "where");
    return wrap(where(c.get(), operand(a, like), operand(b, like)));
  });
  m.def("clip", [](const Proxy& x, double lo, double hi) { return wrap(clip(x.get(), lo, hi)); });
  m.def("concatenate", [](const std::vector<Proxy>& xs, int64_t axis) { return wrap(concat(unwrap_all(xs), axis)); }, nb::arg("xs"),
        nb::arg("axis") = 0);
  m.def("stack", [](const std::vector<Proxy>& xs, int64_t axis) {
    std::vector<Tensor> parts;
    for (const Proxy& p : xs) parts.push_back(unsqueeze(p.get(), {axis}));
    return wrap(concat(parts, axis));
  }, nb::arg("xs"), nb::arg("axis") = 0);
  m.def("take", [](const Proxy& x, const Proxy& idx, int64_t axis) { return wrap(gather(x.get(), idx.get(), axis)); }, nb::arg("x"),
        nb::arg("indices"), nb::arg("axis") = 0);
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
  m.def("broadcast_to", [](const Proxy& x, std::vector<int64_t> shape) { return wrap(expand(x.get(), Shape(shape.begin(), shape.end()))); });
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
