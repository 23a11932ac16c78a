// What the op families' files (src/ir/ops/*.cpp) share: the lists of rows
// each contributes to the table, and builders for rows' scalar functions.
// Rows are written with designated initializers (OpDef, ir/op.h).
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "ir/op.h"

namespace tj::rows {

std::vector<OpDef> elementwise();  // elementwise.cpp: unary, binary, comparisons, logic, selection
std::vector<OpDef> structure();    // structure.cpp: sources, reductions, matmul, views, data movement
std::vector<OpDef> composite();    // composite.cpp: softmax, norms, silu, gelu
std::vector<OpDef> special();      // special.cpp: causal_mask, kv_write, flash_attn, control flow
std::vector<OpDef> attention_grad();  // attention_grad.cpp: flash attention's backward
std::vector<OpDef> conv();            // conv.cpp: convolution
std::vector<OpDef> pool();            // pool.cpp: max pooling

// Scalar functions from one generic, captureless lambda taking one to three
// operands (and optionally the attributes last): f(x), f(x, k), f(a, b),
// f(a, b, k), f(a, b, c), f(a, b, c, k). `floats` instantiates it for float
// and double, `ints` for int64.
template <int N, class L, class E>
E (*scalar_fn())(E, E, E, ScalarAttrs) {
  return [](E a, E b, E c, ScalarAttrs k) -> E {
    (void)a, (void)b, (void)c, (void)k;
    L f{};
    if constexpr (N == 1) {
      if constexpr (std::is_invocable_v<L, E, ScalarAttrs>) return static_cast<E>(f(a, k));
      else return static_cast<E>(f(a));
    } else if constexpr (N == 2) {
      if constexpr (std::is_invocable_v<L, E, E, ScalarAttrs>) return static_cast<E>(f(a, b, k));
      else return static_cast<E>(f(a, b));
    } else {
      if constexpr (std::is_invocable_v<L, E, E, E, ScalarAttrs>) return static_cast<E>(f(a, b, c, k));
      else return static_cast<E>(f(a, b, c));
    }
  };
}

template <int N, class L>
ScalarFns floats(L) {
  return {scalar_fn<N, L, float>(), scalar_fn<N, L, double>(), nullptr};
}
template <int N, class L>
ScalarFns ints(L) {
  return {nullptr, nullptr, scalar_fn<N, L, int64_t>()};
}
// Separate float and integer functions.
template <int N, class F, class I>
ScalarFns both(F, I) {
  return {scalar_fn<N, F, float>(), scalar_fn<N, F, double>(), scalar_fn<N, I, int64_t>()};
}
// One generic function for every domain.
template <int N, class L>
ScalarFns any(L) {
  return {scalar_fn<N, L, float>(), scalar_fn<N, L, double>(), scalar_fn<N, L, int64_t>()};
}

}  // namespace tj::rows
