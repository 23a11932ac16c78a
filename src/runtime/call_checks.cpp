#include "runtime/call_checks.h"

#include "codegen/abi.h"
#include "runtime/gemm.h"
#include "tensorjit/error.h"

namespace tj {

void check_input_names(const Graph& g, const Bindings& inputs) {
  if (inputs.size() == g.inputs().size()) return;
  for (const auto& [name, a] : inputs)
    if (g.find(name) < 0 || g.node(g.find(name)).op != Op::input) throw Error("run: unknown input '" + name + "'");
}

SymEnv sizes_from_inputs(const Graph& g, const Bindings& inputs) {
  SymEnv env;
  for (ValueId v : g.inputs()) {
    auto it = inputs.find(g.node(v).name);
    const auto& shape = g.type(v).shape;
    if (it == inputs.end() || it->second.shape().size() != shape.size()) continue;
    for (size_t d = 0; d < shape.size(); ++d) {
      auto syms = shape[d].symbols();
      if (syms.size() == 1 && shape[d] == Dim::symbol(syms[0])) env.emplace(syms[0], it->second.shape()[d]);
    }
  }
  for (const auto& x : size_symbols(g))
    if (!env.count(x)) throw Error("run: no input gives the size " + x);
  return env;
}

NDArray& checked_input(const Graph& g, ValueId v, Bindings& inputs, const std::vector<int64_t>& shape) {
  const Node& n = g.node(v);
  auto it = inputs.find(n.name);
  if (it == inputs.end()) throw Error("run: missing input '" + n.name + "' of type " + n.type.str());
  NDArray& a = it->second;
  if (a.dtype() != n.type.dtype || a.shape() != shape) throw Error("run: input '" + n.name + "' is " + a.type_str() + ", expected " + n.type.str());
  if (!a.raw()) throw Error("run: input '" + n.name + "' holds no data (a default-constructed array)");
  return a;
}

std::string status_message(int status) {
  switch (status) {
    case tj_status_gemm_failed: return std::string("run: the matrix library failed: ") + gemm_f32_library();
    case tj_status_kv_write_outside: return "run: kv_write position outside the cache";
    case tj_status_division_by_zero: return "run: integer division by zero";
    case tj_status_index_out_of_range: return "run: gather or scatter_add index out of range";
    default: return "run: the program stopped with status " + std::to_string(status);
  }
}

}  // namespace tj
