// Reference kernels: one per op, written for clarity first and reasonable
// speed second (the interpreter is the eager baseline). Values are dense
// row-major arrays of the compute type T (float or double).
#pragma once

#include <memory>
#include <vector>

#include "ir/graph.h"

namespace tj {

template <class T>
struct Array {
  std::vector<int64_t> shape;
  std::shared_ptr<const std::vector<T>> data;  // shared: views that keep the layout share it
  int64_t numel() const { return static_cast<int64_t>(data ? data->size() : 0); }
  const T* ptr() const { return data->data(); }
};

template <class T>
Array<T> eval_node(const Node& n, const std::vector<const Array<T>*>& in, const SymEnv& env);

// bf16/f16 values are rounded to their precision; others are left alone.
template <class T>
void round_to_dtype(Array<T>& a, DType dt);

}  // namespace tj
