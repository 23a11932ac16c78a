// The C++ emitter's pointwise kernels: one loop nest over the iteration space,
// every elementwise op in registers.
#include "codegen/cpp/emitter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "tensorjit/error.h"

namespace tj::cpp {

// Elementwise ops from `first` on, in loop nests over the kernel's space,
// every op in registers; a store (concat, kv_write) ends a nest and runs as
// a copy loop, in program order (a concat as rows with the ops after it). Each iteration stores its results after
// it has computed them all: a result planned in place of an input (memory/
// lifetimes.cpp) must not overwrite the element before every op has read it.
std::string Emitter::pointwise_body(const Kernel& K, size_t first, bool columns) {
  Sizes sp = K.space;
  Idx iv = loop_vars(sp.size());
  std::string code, inner, stores;
  local_.clear();
  auto flush = [&] {
    if (!inner.empty()) code += loops(sp, iv, inner + stores, true, true, columns);
    inner.clear();
    stores.clear();
    local_.clear();
  };
  for (size_t i = first; i < K.ops.size(); ++i) {
    ValueId v = K.ops[i];
    const Node& n = g_.node(v);
    if (n.def().fuse == Fuse::store) {
      flush();
      if (const auto rows = streamed_.find(i); rows != streamed_.end()) {  // as plan_temporaries decided
        code += concat_pass(K, i, rows->second);
        i = rows->second - 1;
        continue;
      }
      code += store(v);
      continue;
    }
    if (n.type.shape != sp) throw Error("code generation: op outside the kernel's iteration space");
    append_statement(v, iv, sp, "  ", &inner, &stores);
  }
  flush();
  return code;
}

// Op v at index `iv` of `sp` as a local (into `inner`) and, when it lives in
// memory, its store (into `stores`); later ops read the local.
void Emitter::append_statement(ValueId v, const Idx& iv, const Sizes& sp, const std::string& at, std::string* inner, std::string* stores) {
  const std::string var = "v" + std::to_string(v);
  *inner += at + "const " + CT(v) + " " + var + " = " + elementwise_or_gather(g_.node(v), iv) + ";\n";
  if (in_mem_[static_cast<size_t>(v)] || is_temp(v)) *stores += at + ptr(v) + "[" + flat(iv, sp) + "] = " + var + ";\n";
  local_[v] = var;
}

// The statements computing the kernel's elementwise ops from `first` on at
// index `iv` of `sp`, storing those that live in memory: the body of an
// epilogue loop the kernel kind writes itself (no stores among them; a
// conv's sums over its positions, FusionOptions::conv_reductions, are the
// conv kind's to add up).
std::string Emitter::pointwise_statements(const Kernel& K, size_t first, const Idx& iv, const Sizes& sp, const std::string& at) {
  std::string inner, stores;
  for (size_t i = first; i < K.ops.size(); ++i) {
    ValueId v = K.ops[i];
    const Node& n = g_.node(v);
    if (sums_in_epilogue(g_, K, v)) continue;
    if (n.def().fuse == Fuse::store || n.type.shape != sp) throw Error("code generation: an epilogue op outside the kernel's iteration space");
    append_statement(v, iv, sp, at, &inner, &stores);
  }
  return inner + stores;
}

}  // namespace tj::cpp
