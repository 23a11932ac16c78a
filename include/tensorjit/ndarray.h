// A concrete host tensor: dtype, shape, and owned, 64-byte aligned, row-major
// data. What users hand to the interpreter and (later) to compiled code.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensorjit/dtype.h"

namespace tj {

class NDArray {
 public:
  NDArray() = default;
  NDArray(DType dtype, std::vector<int64_t> shape);  // zero-filled
  NDArray(const NDArray& o);
  NDArray& operator=(const NDArray& o);
  NDArray(NDArray&&) noexcept = default;
  NDArray& operator=(NDArray&&) noexcept = default;

  static NDArray from(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values);
  static NDArray scalar(DType dtype, double v) { return from(dtype, {}, {v}); }

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * static_cast<size_t>(dtype_size(dtype_)); }
  void* raw() { return data_.get(); }
  const void* raw() const { return data_.get(); }

  template <class T>
  T* data() { check_type(sizeof(T)); return static_cast<T*>(raw()); }
  template <class T>
  const T* data() const { check_type(sizeof(T)); return static_cast<const T*>(raw()); }

  // Element access through double, whatever the dtype (slow; for tests, I/O).
  double get(int64_t i) const;
  void set(int64_t i, double v);
  std::vector<double> to_vector() const;

  std::string type_str() const;  // "f32[2,3]"

 private:
  struct Free {
    void operator()(void* p) const;
  };
  struct Uninitialized {};
  NDArray(DType dtype, std::vector<int64_t> shape, Uninitialized);  // only the padding zeroed
  void check_type(size_t elem) const;
  DType dtype_ = DType::f32;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  std::unique_ptr<void, Free> data_;
};

// The element count of an array of `shape` and `t`, checked: throws
// tj::Error ("array too large") when the count or its size in bytes does
// not fit in 63 bits, or ("negative dimension") for a negative size.
int64_t checked_numel(const std::vector<int64_t>& shape, DType t);

// Rounding to the 16-bit float formats (round to nearest even, once), as doubles.
double round_to_bf16(double v);
double round_to_f16(double v);
// The nearest value of dtype `t` (floats round to nearest even; integers
// truncate and saturate, NaN becomes 0; bool is v != 0).
double round_to_dtype(double v, DType t);

}  // namespace tj
