// The interpreter's driver: binds inputs, walks the graph, frees each value
// after its last use. The kernels live in reference/kernels.cpp.
#include "reference/interpreter.h"

#include <cmath>
#include <cstring>
#include <map>
#include <type_traits>

#include "reference/kernels.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

bool dtype_class_matches(DType declared, DType given) {
  if (is_float(declared)) return is_float(given);
  if (is_int(declared)) return is_int(given);
  return declared == given;
}

}  // namespace

SymEnv bind_symbols(const Graph& g, const Bindings& inputs) {
  SymEnv env;
  std::vector<std::pair<const Node*, const NDArray*>> bound;
  for (const Node& n : g.nodes()) {
    if (n.op != Op::input && n.op != Op::param) continue;
    auto it = inputs.find(n.name);
    if (it == inputs.end()) throw Error("missing " + std::string(n.def().name) + " '" + n.name + "' of type " + n.type.str());
    const NDArray& a = it->second;
    auto mismatch = [&](const std::string& why) {
      throw Error(std::string(n.def().name) + " '" + n.name + "': expected " + n.type.str() + ", got " + a.type_str() + " (" + why + ")");
    };
    if (!dtype_class_matches(n.type.dtype, a.dtype())) mismatch("dtype");
    if (static_cast<int>(a.shape().size()) != n.type.rank()) mismatch("rank");
    for (size_t d = 0; d < a.shape().size(); ++d) {
      const Dim& dim = n.type.shape[d];
      auto syms = dim.symbols();
      if (syms.size() == 1 && dim == Dim::symbol(syms[0])) {
        auto [e, inserted] = env.emplace(syms[0], a.shape()[d]);
        if (!inserted && e->second != a.shape()[d])
          mismatch("dim " + std::to_string(d) + ": " + syms[0] + " is already " + std::to_string(e->second));
      }
    }
    bound.emplace_back(&n, &a);
  }
  for (const auto& [name, arr] : inputs) {
    (void)arr;
    if (g.find(name) < 0) throw Error("unknown input '" + name + "': the graph has no input or param of that name");
  }
  for (const auto& [n, a] : bound) {
    for (size_t d = 0; d < a->shape().size(); ++d) {
      int64_t want;
      try {
        want = n->type.shape[d].eval(env);
      } catch (const Error& e) {
        throw Error(std::string(n->def().name) + " '" + n->name + "': dim " + n->type.shape[d].str() + " cannot be bound: " + e.what());
      }
      if (want != a->shape()[d])
        throw Error(std::string(n->def().name) + " '" + n->name + "': expected " + n->type.str() + ", got " + a->type_str() +
                    " (dim " + std::to_string(d) + " is " + std::to_string(want) + " here)");
    }
  }
  return env;
}

namespace {

// An interpreter value as an array of `declared`'s dtype (floats in the
// compute type), and back.
template <class T>
NDArray to_ndarray(const Value<T>& v, DType declared, DType compute) {
  NDArray o(is_float(declared) ? compute : declared, v.shape());
  if (v.is_int()) {
    const auto& d = *v.template as<int64_t>().data;
    for (int64_t k = 0; k < o.numel(); ++k) {
      int64_t x = d[static_cast<size_t>(k)];
      store_int(o.raw(), k, declared, x);
    }
  } else {
    const auto& d = *v.template as<T>().data;
    for (int64_t k = 0; k < o.numel(); ++k) o.set(k, static_cast<double>(d[static_cast<size_t>(k)]));
  }
  return o;
}

// `what` names the value in errors ("input 'x'").
template <class T>
Value<T> from_ndarray(const NDArray& a, DType declared, const std::string& what) {
  if (!a.raw()) throw Error(what + ": the array holds no data (default-constructed)");
  if (is_float(declared)) {
    auto data = std::make_shared<std::vector<T>>(static_cast<size_t>(a.numel()));
    constexpr DType native = std::is_same_v<T, float> ? DType::f32 : DType::f64;
    if (a.dtype() == native) {  // the common case: no conversion
      if (a.nbytes()) std::memcpy(data->data(), a.raw(), a.nbytes());
    } else {
      for (int64_t k = 0; k < a.numel(); ++k) (*data)[static_cast<size_t>(k)] = static_cast<T>(a.get(k));
    }
    Array<T> r{a.shape(), std::move(data)};
    round_to_dtype(r, declared);
    return {std::move(r)};
  }
  // Integers and bools exactly, from the array's own width.
  auto data = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(a.numel()));
  for (int64_t k = 0; k < a.numel(); ++k) {
    if (!is_int(a.dtype()) && a.dtype() != DType::boolean)
      throw Error(what + ": expected " + std::string(dtype_name(declared)) + " data, got " + a.type_str());
    int64_t x = load_int(a.raw(), k, a.dtype());
    if (a.dtype() == DType::boolean) x = x != 0;
    // u64 and i64 hold the same bits; a negative value is no u64, nor a u64 above INT64_MAX an i64.
    if ((declared == DType::u64) != (a.dtype() == DType::u64) && x < 0 && is_int(declared) && is_int(a.dtype()))
      throw Error(what + ": value " + std::to_string(x) + " of " + std::string(dtype_name(a.dtype())) + " is out of range for " +
                  std::string(dtype_name(declared)));
    if (wrap_to(x, declared) != x)
      throw Error(what + ": value " + std::to_string(x) + " is out of range for " + std::string(dtype_name(declared)));
    (*data)[static_cast<size_t>(k)] = x;
  }
  return {Array<int64_t>{a.shape(), std::move(data)}};
}

template <class T>
bool truthy(const Value<T>& v) {
  if (v.is_int()) return v.template as<int64_t>().ptr()[0] != 0;
  return v.template as<T>().ptr()[0] != T(0);
}

// A region applied to values: its inputs bound in order.
template <class T>
std::vector<Value<T>> apply_region(const Graph& r, const std::vector<const Value<T>*>& args, DType compute) {
  Bindings b;
  auto ins = r.inputs();
  for (size_t i = 0; i < ins.size(); ++i) b[r.node(ins[i]).name] = to_ndarray(*args[i], r.type(ins[i]).dtype, compute);
  std::vector<Value<T>> out;
  auto res = interpret(r, b, {compute});
  for (size_t i = 0; i < res.size(); ++i) out.push_back(from_ndarray<T>(res[i], r.type(r.outputs()[i]).dtype, "region @" + r.name() + " result"));
  return out;
}

// while_loop and cond: every result (result 0 is the op's own value).
template <class T>
std::vector<Value<T>> eval_control(const Node& n, const std::vector<const Value<T>*>& in, DType compute) {
  if (n.op == Op::cond) {
    bool taken = truthy(*in[0]);
    std::vector<const Value<T>*> args(in.begin() + 1, in.end());
    return apply_region(*std::get<Region>(n.attr(taken ? "then" : "else")), args, compute);
  }
  const Graph& cond = *std::get<Region>(n.attr("cond"));
  const Graph& body = *std::get<Region>(n.attr("body"));
  size_t carried = static_cast<size_t>(n.attr_int("carried"));
  std::vector<Value<T>> state;
  for (const Value<T>* a : in) state.push_back(*a);
  for (;;) {
    std::vector<const Value<T>*> args;
    for (const Value<T>& a : state) args.push_back(&a);
    if (!truthy(apply_region(cond, args, compute)[0])) break;
    std::vector<Value<T>> next = apply_region(body, args, compute);
    for (size_t i = 0; i < carried; ++i) state[i] = std::move(next[i]);
  }
  state.resize(carried);
  return state;
}

template <class T>
std::vector<NDArray> run(const Graph& g, const Bindings& inputs, DType compute) {
  SymEnv env = bind_symbols(g, inputs);

  // Last use of each value, so intermediate results are freed early.
  std::vector<size_t> last_use(g.size(), 0);
  for (size_t i = 0; i < g.size(); ++i)
    for (ValueId v : g.nodes()[i].inputs) last_use[static_cast<size_t>(v)] = i;
  for (ValueId v : g.outputs()) last_use[static_cast<size_t>(v)] = g.size();

  std::vector<Value<T>> vals(g.size());
  std::map<ValueId, std::vector<Value<T>>> results;  // of while_loop and cond, for `result`
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op == Op::input || n.op == Op::param) {
      vals[i] = from_ndarray<T>(inputs.find(n.name)->second, n.type.dtype, std::string(n.def().name) + " '" + n.name + "'");
    } else {
      std::vector<const Value<T>*> operands;
      for (ValueId v : n.inputs) operands.push_back(&vals[static_cast<size_t>(v)]);
      try {
        if (n.op == Op::result) {
          vals[i] = results.at(n.inputs[0]).at(static_cast<size_t>(n.attr_int("index")));
        } else if (n.def().category == OpCategory::control) {
          auto r = eval_control(n, operands, compute);
          vals[i] = r[0];
          results[static_cast<ValueId>(i)] = std::move(r);
        } else {
          vals[i] = eval_node(n, operands, env);
        }
      } catch (const Error& e) {
        throw Error("while interpreting %" + std::to_string(i) + " = " + n.def().name + ": " + e.what());
      }
    }
    for (ValueId v : n.inputs)
      if (last_use[static_cast<size_t>(v)] == i) vals[static_cast<size_t>(v)] = Value<T>{};
  }

  std::vector<NDArray> outs;
  for (ValueId v : g.outputs()) outs.push_back(to_ndarray(vals[static_cast<size_t>(v)], g.type(v).dtype, compute));
  return outs;
}

}  // namespace

std::vector<NDArray> interpret(const Graph& g, const Bindings& inputs, const InterpretOptions& opts) {
  std::vector<NDArray> outs;
  if (opts.compute == DType::f64) outs = run<double>(g, inputs, DType::f64);
  else if (opts.compute == DType::f32) outs = run<float>(g, inputs, DType::f32);
  else throw Error("interpret: compute dtype must be f32 or f64, not " + std::string(dtype_name(opts.compute)));
  if (opts.declared_dtypes)
    for (size_t i = 0; i < outs.size(); ++i) {
      DType want = g.type(g.outputs()[i]).dtype;
      if (outs[i].dtype() == want) continue;
      NDArray o(want, outs[i].shape());
      for (int64_t k = 0; k < o.numel(); ++k) o.set(k, outs[i].get(k));  // rounded to the declared format
      outs[i] = std::move(o);
    }
  return outs;
}

}  // namespace tj
