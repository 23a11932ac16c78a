// A concrete host tensor: dtype, shape, and row-major data, owned (64-byte
// aligned) or viewed (memory the caller owns). What users hand to the
// interpreter and to compiled code.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "tensorjit/dtype.h"

namespace tj {

// The dtype of C++ element type T (float, double, the fixed-width integers, bool).
template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, double>) return DType::f64;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::i32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::i64;
  else if constexpr (std::is_same_v<T, int8_t>) return DType::i8;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::u8;
  else if constexpr (std::is_same_v<T, int16_t>) return DType::i16;
  else if constexpr (std::is_same_v<T, uint16_t>) return DType::u16;
  else if constexpr (std::is_same_v<T, uint32_t>) return DType::u32;
  else if constexpr (std::is_same_v<T, uint64_t>) return DType::u64;
  else if constexpr (std::is_same_v<T, bool>) return DType::boolean;
  else static_assert(sizeof(T) == 0, "no tensorjit dtype for this type (bf16/f16: NDArray::copy_of with raw bytes)");
}

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
  // A copy of typed values, bit for bit (no conversion through double).
  template <class T>
  static NDArray of(std::vector<int64_t> shape, std::span<const T> values) {
    return copy_of(dtype_of<T>(), std::move(shape), values.data(), values.size_bytes());
  }
  template <class T>
  static NDArray of(std::vector<int64_t> shape, const std::vector<T>& values) {
    return of<T>(std::move(shape), std::span<const T>(values));
  }
  // A copy of `bytes` bytes of raw data in `dtype` (bf16/f16 as their bits).
  static NDArray copy_of(DType dtype, std::vector<int64_t> shape, const void* data, size_t bytes);
  // A view onto memory the caller owns and keeps alive while the view (or a
  // run it was given to) uses it: no copy. Writes through the view (donated
  // caches) write the caller's memory. A copy of a view is a view of the same
  // memory (as putting it into a Bindings map copies it); copy_of copies data.
  static NDArray view(DType dtype, std::vector<int64_t> shape, void* data);
  // A view whose memory `owner` keeps alive (a file mapping, say): every
  // copy of the view shares the owner, and the last one to go releases it.
  static NDArray view(DType dtype, std::vector<int64_t> shape, void* data, std::shared_ptr<const void> owner);
  // `owned` (moved, not copied) as such a view: every copy of the result
  // shares its one block, where copies of an owned array copy the data.
  // A view is returned as it is.
  static NDArray shared(NDArray owned);
  bool is_view() const { return data_ && !data_.get_deleter().owned; }

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
    Free() : owned(true) {}
    explicit Free(bool o, std::shared_ptr<const void> k = nullptr) : owned(o), keep(std::move(k)) {}
    bool owned;
    std::shared_ptr<const void> keep;  // what keeps a view's memory alive, if anything
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

// Named arrays: a graph's inputs or params.
using Bindings = std::map<std::string, NDArray, std::less<>>;

// The element count of an array of `shape` and `t`, checked: throws
// tj::Error ("array too large") when the count or its size in bytes does
// not fit in 63 bits, or ("negative dimension") for a negative size.
int64_t checked_numel(const std::vector<int64_t>& shape, DType t);

// Rounding to the 16-bit float formats (round to nearest even, once), as doubles.
double round_to_bf16(double v);
double round_to_f16(double v);
// The nearest value of dtype `t` (floats round to nearest even; integers
// truncate and saturate, NaN becomes 0, but the 4- and 2-bit ones give 0
// out of range; bool is v != 0). float8 values beyond the format saturate
// to its largest, or with `saturate` false become infinity or NaN (ONNX
// Cast's tables, docs/ir.md). An NDArray of a float8 type stores values
// without saturating.
double round_to_dtype(double v, DType t, bool saturate = true);

}  // namespace tj
