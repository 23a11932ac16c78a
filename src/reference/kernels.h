// Reference kernels: one per op, written for clarity first and reasonable
// speed second (the interpreter is the eager baseline). Values are dense
// row-major arrays: floating values in the compute type T (float or double),
// integer and bool values exactly, as int64 (bool as 0 and 1).
//
// Integer semantics (docs/ir.md): two's complement, wrapping to the result's
// width after every op (i32 results wrap to 32 bits); division truncates
// toward zero, INT_MIN / -1 wraps to INT_MIN, division by zero is an error;
// float-to-int casts saturate to the target's range and NaN becomes 0;
// int-to-int casts wrap.
#pragma once

#include <memory>
#include <variant>
#include <vector>

#include "ir/graph.h"

namespace tj {

template <class E>
struct Array {
  std::vector<int64_t> shape;
  std::shared_ptr<const std::vector<E>> data;  // shared: views that keep the layout share it
  int64_t numel() const { return static_cast<int64_t>(data ? data->size() : 0); }
  const E* ptr() const { return data->data(); }
};

// One value of the interpreter: floats in T, integers and bools in int64.
template <class T>
struct Value {
  std::variant<Array<T>, Array<int64_t>> a;
  bool is_int() const { return a.index() == 1; }
  const std::vector<int64_t>& shape() const { return is_int() ? std::get<1>(a).shape : std::get<0>(a).shape; }
  template <class E>
  const Array<E>& as() const { return std::get<Array<E>>(a); }
};

template <class T>
Value<T> eval_node(const Node& n, const std::vector<const Value<T>*>& in, const SymEnv& env);

// flash_attn and its backward (attn_lse, attn_dq, attn_dkv), in double:
// reference/attention.cpp.
template <class T>
Array<T> attention_kernel(const Node& n, const std::vector<const Value<T>*>& in);

// conv: reference/conv.cpp.
template <class T>
Array<T> conv_kernel(const Node& n, const std::vector<const Value<T>*>& in);

// max_pool and sum_pool: reference/pool.cpp.
template <class T>
Array<T> pool_kernel(const Node& n, const std::vector<const Value<T>*>& in);

// bf16/f16 and float8/float4 values are rounded to their format (float8
// saturating unless told not to); others are left alone.
template <class T>
void round_to_dtype(Array<T>& a, DType dt, bool saturate = true);
// Integers wrapped to the width of `dt` (i32: 32 bits), bools to 0/1.
void wrap_to_dtype(Array<int64_t>& a, DType dt);

}  // namespace tj
