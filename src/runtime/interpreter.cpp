// The interpreter's driver: binds inputs, walks the graph, frees each value
// after its last use. The kernels live in reference_kernels.cpp.
#include "runtime/interpreter.h"

#include <cmath>
#include <cstring>
#include <map>

#include "runtime/reference_kernels.h"
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

template <class T>
NDArray to_ndarray(const Array<T>& a, DType t, DType compute) {
  NDArray o(is_float(t) ? compute : t, a.shape);
  for (int64_t k = 0; k < o.numel(); ++k) o.set(k, static_cast<double>((*a.data)[static_cast<size_t>(k)]));
  return o;
}

template <class T>
Array<T> from_ndarray(const NDArray& a) {
  auto data = std::make_shared<std::vector<T>>(static_cast<size_t>(a.numel()));
  for (int64_t k = 0; k < a.numel(); ++k) (*data)[static_cast<size_t>(k)] = static_cast<T>(a.get(k));
  return Array<T>{a.shape(), std::move(data)};
}

// A region applied to arrays: its inputs bound in order.
template <class T>
std::vector<Array<T>> apply_region(const Graph& r, const std::vector<const Array<T>*>& args, DType compute) {
  Bindings b;
  auto ins = r.inputs();
  for (size_t i = 0; i < ins.size(); ++i) b[r.node(ins[i]).name] = to_ndarray(*args[i], r.type(ins[i]).dtype, compute);
  std::vector<Array<T>> out;
  for (const NDArray& a : interpret(r, b, {compute})) out.push_back(from_ndarray<T>(a));
  return out;
}

// while_loop and cond: every result (result 0 is the op's own value).
template <class T>
std::vector<Array<T>> eval_control(const Node& n, const std::vector<const Array<T>*>& in, DType compute) {
  if (n.op == Op::cond) {
    bool taken = (*in[0]->data)[0] != 0;
    std::vector<const Array<T>*> args(in.begin() + 1, in.end());
    return apply_region(*std::get<Region>(n.attr(taken ? "then" : "else")), args, compute);
  }
  const Graph& cond = *std::get<Region>(n.attr("cond"));
  const Graph& body = *std::get<Region>(n.attr("body"));
  size_t carried = static_cast<size_t>(n.attr_int("carried"));
  std::vector<Array<T>> state;
  for (const Array<T>* a : in) state.push_back(*a);
  for (;;) {
    std::vector<const Array<T>*> args;
    for (const Array<T>& a : state) args.push_back(&a);
    if ((*apply_region(cond, args, compute)[0].data)[0] == 0) break;
    std::vector<Array<T>> next = apply_region(body, args, compute);
    for (size_t i = 0; i < carried; ++i) state[i] = std::move(next[i]);
  }
  state.resize(carried);
  return state;
}

template <class T>
std::vector<NDArray> run(const Graph& g, const Bindings& inputs, DType compute) {
  SymEnv env = bind_symbols(g, inputs);
  const double int_limit = std::is_same_v<T, float> ? 16777216.0 : 9007199254740992.0;

  // Last use of each value, so intermediate results are freed early.
  std::vector<size_t> last_use(g.size(), 0);
  for (size_t i = 0; i < g.size(); ++i)
    for (ValueId v : g.nodes()[i].inputs) last_use[static_cast<size_t>(v)] = i;
  for (ValueId v : g.outputs()) last_use[static_cast<size_t>(v)] = g.size();

  std::vector<Array<T>> vals(g.size());
  std::map<ValueId, std::vector<Array<T>>> results;  // of while_loop and cond, for `result`
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op == Op::input || n.op == Op::param) {
      const NDArray& a = inputs.find(n.name)->second;
      auto data = std::make_shared<std::vector<T>>(static_cast<size_t>(a.numel()));
      constexpr DType native = std::is_same_v<T, float> ? DType::f32 : DType::f64;
      if (a.dtype() == native && n.type.dtype == native) {  // the common case: no conversion
        std::memcpy(data->data(), a.raw(), a.nbytes());
        vals[i] = Array<T>{a.shape(), std::move(data)};
        continue;
      }
      for (int64_t k = 0; k < a.numel(); ++k) {
        double v = a.get(k);
        if (!is_float(n.type.dtype) && std::fabs(v) > int_limit)
          throw Error(std::string(n.def().name) + " '" + n.name + "': integer value " + std::to_string(v) +
                      " is not exact in " + std::string(dtype_name(compute)) + " interpretation");
        (*data)[static_cast<size_t>(k)] = static_cast<T>(v);
      }
      vals[i] = Array<T>{a.shape(), std::move(data)};
      round_to_dtype(vals[i], n.type.dtype);
    } else {
      std::vector<const Array<T>*> operands;
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
      if (last_use[static_cast<size_t>(v)] == i) vals[static_cast<size_t>(v)] = Array<T>{};
  }

  std::vector<NDArray> outs;
  for (ValueId v : g.outputs()) {
    const Node& n = g.node(v);
    const Array<T>& a = vals[static_cast<size_t>(v)];
    DType dt = is_float(n.type.dtype) ? compute : n.type.dtype;
    NDArray o(dt, a.shape);
    for (int64_t k = 0; k < o.numel(); ++k) o.set(k, static_cast<double>((*a.data)[static_cast<size_t>(k)]));
    outs.push_back(std::move(o));
  }
  return outs;
}

}  // namespace

std::vector<NDArray> interpret(const Graph& g, const Bindings& inputs, const InterpretOptions& opts) {
  if (opts.compute == DType::f64) return run<double>(g, inputs, DType::f64);
  if (opts.compute == DType::f32) return run<float>(g, inputs, DType::f32);
  throw Error("interpret: compute dtype must be f32 or f64, not " + std::string(dtype_name(opts.compute)));
}

}  // namespace tj
