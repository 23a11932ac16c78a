// A constant's contents, held in the constant's own dtype: a frozen f32
// weight takes 4 bytes per value, as it will at run time, and its bytes are
// what the compiled program reads (no conversion, no second copy). One value
// for a tensor of many elements means a splat.
#pragma once

#include <memory>
#include <vector>

#include "tensorjit/ndarray.h"

namespace tj {

class ConstValues {
 public:
  // `values` rounded to `dtype` as storing them would (integers saturate).
  static std::shared_ptr<const ConstValues> of(DType dtype, const std::vector<double>& values);
  // An array's values, in its dtype, taken over without copying.
  static std::shared_ptr<const ConstValues> adopt(NDArray values);

  DType dtype() const { return data_.dtype(); }
  size_t size() const { return static_cast<size_t>(data_.numel()); }
  bool empty() const { return size() == 0; }
  double operator[](size_t i) const { return data_.get(static_cast<int64_t>(i)); }
  // Value i of an integer or bool constant, exactly (a double has 53 bits).
  int64_t int_at(size_t i) const;
  const void* raw() const { return data_.raw(); }  // 64-byte aligned
  size_t nbytes() const { return data_.nbytes(); }

  // The values as an array of `shape` (a splat is broadcast).
  NDArray to_array(const std::vector<int64_t>& shape) const;

 private:
  explicit ConstValues(NDArray data) : data_(std::move(data)) {}
  NDArray data_;  // read flat, whatever its shape
};

// `data` in `dtype`: itself when it already is, else a rounded copy.
std::shared_ptr<const ConstValues> in_dtype(const std::shared_ptr<const ConstValues>& data, DType dtype);

}  // namespace tj
