#include "tensorjit/ndarray.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "support/minifloat.h"
#include "tensorjit/error.h"

namespace tj {

float to_float_round_odd(double v);

namespace {

uint16_t bf16_bits(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}
float bf16_value(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// The float8/float4 formats by dtype (src/support/minifloat.h).
template <class F>
auto with_format(DType t, F f) {
  switch (minifloat_format(t)) {
    case 0: return f.template operator()<0>();
    case 1: return f.template operator()<1>();
    case 2: return f.template operator()<2>();
    case 3: return f.template operator()<3>();
    case 4: return f.template operator()<4>();
    case 5: return f.template operator()<5>();
    default: throw Error(std::string(dtype_name(t)) + " is not a float8/float4 type");
  }
}

float mini_round(double v, DType t, bool saturate) {
  return with_format(t, [&]<int F>() { return tj_mini_round<F>(to_float_round_odd(v), saturate); });
}
uint8_t mini_bits(double v, DType t) {  // not saturating: IEEE's conversion, as ml_dtypes' astype
  return with_format(t, [&]<int F>() { return static_cast<uint8_t>(tj_mini_bits<F>(tj_mini_round<F>(to_float_round_odd(v), false))); });
}
double mini_value(uint8_t b, DType t) {
  return with_format(t, [&]<int F>() { return static_cast<double>(tj_mini_value<F>(b)); });
}

}  // namespace

// double -> float rounding to odd: an inexact result gets its last bit set.
// Rounding that float again to a format of at most 11 significant bits then
// equals rounding the double directly (float has 24 >= 2*11+2 bits), so
// bf16 and f16 values are rounded once, not twice.
float to_float_round_odd(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(v) || static_cast<double>(f) == v) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}

double round_to_bf16(double v) { return bf16_value(bf16_bits(to_float_round_odd(v))); }
double round_to_f16(double v) { return static_cast<double>(static_cast<_Float16>(to_float_round_odd(v))); }

double round_to_dtype(double v, DType t, bool saturate) {
  if (is_minifloat(t)) return mini_round(v, t, saturate);
  switch (t) {
    case DType::f64: return v;
    case DType::f32: return static_cast<float>(v);
    case DType::bf16: return round_to_bf16(v);
    case DType::f16: return round_to_f16(v);
    case DType::boolean: return v != 0 ? 1.0 : 0.0;
    case DType::i64: return std::isnan(v) ? 0.0 : std::clamp(std::trunc(v), -9223372036854775808.0, 9223372036854774784.0);
    case DType::u64: return std::isnan(v) ? 0.0 : std::clamp(std::trunc(v), 0.0, 18446744073709549568.0);
    default:
      if (is_subbyte_int(t)) {  // out of range is undefined in ONNX's Cast; 0, as ml_dtypes (its reference) gives
        double r = std::trunc(v);
        return r >= int_min(t) && r <= int_max(t) ? r : 0.0;
      }
      return std::isnan(v) ? 0.0 : std::clamp(std::trunc(v), int_min(t), int_max(t));  // the narrower integers
  }
}

void NDArray::Free::operator()(void* p) const {
  if (owned) std::free(p);
}

NDArray NDArray::copy_of(DType dtype, std::vector<int64_t> shape, const void* data, size_t bytes) {
  NDArray a(dtype, std::move(shape), Uninitialized{});
  if (bytes != a.nbytes())
    throw Error("NDArray: " + std::to_string(bytes) + " bytes of data for " + a.type_str() + " (" + std::to_string(a.nbytes()) + " bytes)");
  if (bytes) std::memcpy(a.raw(), data, bytes);
  return a;
}

NDArray NDArray::view(DType dtype, std::vector<int64_t> shape, void* data) {
  NDArray a;
  a.dtype_ = dtype;
  a.numel_ = checked_numel(shape, dtype);
  a.shape_ = std::move(shape);
  if (!data && a.numel_ > 0) throw Error("NDArray::view of a null pointer for " + a.type_str());
  a.data_ = std::unique_ptr<void, Free>(data, Free(false));
  return a;
}

NDArray NDArray::view(DType dtype, std::vector<int64_t> shape, void* data, std::shared_ptr<const void> owner) {
  NDArray a = view(dtype, std::move(shape), data);
  a.data_.get_deleter().keep = std::move(owner);
  return a;
}

NDArray NDArray::shared(NDArray owned) {
  if (owned.is_view() || !owned.data_) return owned;
  auto keep = std::make_shared<NDArray>(std::move(owned));
  return view(keep->dtype_, keep->shape_, keep->raw(), keep);
}

int64_t checked_numel(const std::vector<int64_t>& shape, DType t) {
  int64_t n = 1, bytes;
  auto str = [&] {
    std::string s = std::string(dtype_name(t)) + "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
    return s + "]";
  };
  for (int64_t d : shape)
    if (d < 0) throw Error("negative dimension in array shape " + str());
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) throw Error("array too large: " + str() + " has more than 2^63 elements");
  // Room for rounding the allocation up to 64 bytes.
  if (__builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(t)), &bytes) || bytes > INT64_MAX - 64)
    throw Error("array too large: " + str() + " needs more than 2^63 bytes");
  return n;
}

NDArray::NDArray(DType dtype, std::vector<int64_t> shape) : NDArray(dtype, std::move(shape), Uninitialized{}) {
  std::memset(data_.get(), 0, nbytes());
}

NDArray::NDArray(DType dtype, std::vector<int64_t> shape, Uninitialized) : dtype_(dtype), shape_(std::move(shape)) {
  numel_ = checked_numel(shape_, dtype_);
  size_t bytes = (nbytes() + 63) / 64 * 64;
  if (bytes == 0) bytes = 64;
  data_.reset(std::aligned_alloc(64, bytes));
  if (!data_) throw Error("out of memory allocating " + std::to_string(bytes) + " bytes for " + type_str());
  std::memset(static_cast<char*>(data_.get()) + nbytes(), 0, bytes - nbytes());
}

NDArray::NDArray(const NDArray& o) : dtype_(o.dtype_), shape_(o.shape_), numel_(o.numel_) {
  if (!o.data_) return;  // a default-constructed array copies as one
  if (o.is_view()) {     // a view copies as a view of the same memory
    data_ = std::unique_ptr<void, Free>(o.data_.get(), o.data_.get_deleter());
    return;
  }
  *this = NDArray(o.dtype_, o.shape_, Uninitialized{});
  if (nbytes()) std::memcpy(raw(), o.raw(), nbytes());
}

NDArray& NDArray::operator=(const NDArray& o) {
  if (this != &o) *this = NDArray(o);
  return *this;
}

NDArray NDArray::from(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values) {
  NDArray a(dtype, std::move(shape));
  if (static_cast<int64_t>(values.size()) != a.numel())
    throw Error("NDArray::from: " + std::to_string(values.size()) + " values for " + a.type_str());
  for (int64_t i = 0; i < a.numel(); ++i) a.set(i, values[static_cast<size_t>(i)]);
  return a;
}

void NDArray::check_type(size_t elem) const {
  if (elem != static_cast<size_t>(dtype_size(dtype_))) throw Error("NDArray: element type does not match " + type_str());
}

double NDArray::get(int64_t i) const {
  const void* p = raw();
  if (is_minifloat(dtype_)) return mini_value(static_cast<const uint8_t*>(p)[i], dtype_);
  switch (dtype_) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::f64: return static_cast<const double*>(p)[i];
    case DType::bf16: return bf16_value(static_cast<const uint16_t*>(p)[i]);
    case DType::f16: return static_cast<double>(static_cast<const _Float16*>(p)[i]);
    case DType::boolean: return static_cast<const uint8_t*>(p)[i] ? 1.0 : 0.0;
    case DType::u64: return static_cast<double>(static_cast<const uint64_t*>(p)[i]);
    default: return static_cast<double>(load_int(p, i, dtype_));
  }
}

void NDArray::set(int64_t i, double v) {
  void* p = raw();
  if (is_minifloat(dtype_)) {
    static_cast<uint8_t*>(p)[i] = mini_bits(v, dtype_);
    return;
  }
  switch (dtype_) {
    case DType::f32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::f64: static_cast<double*>(p)[i] = v; break;
    case DType::bf16: static_cast<uint16_t*>(p)[i] = bf16_bits(to_float_round_odd(v)); break;
    case DType::f16: static_cast<_Float16*>(p)[i] = static_cast<_Float16>(to_float_round_odd(v)); break;
    // Integers saturate (NaN becomes 0) instead of overflowing.
    case DType::i64:  // 2^63 and beyond saturate to INT64_MAX (which no double holds)
      static_cast<int64_t*>(p)[i] = v >= 9223372036854775808.0 ? INT64_MAX : static_cast<int64_t>(round_to_dtype(v, DType::i64));
      break;
    case DType::u64:  // likewise 2^64 and beyond
      static_cast<uint64_t*>(p)[i] = v >= 18446744073709551616.0 ? UINT64_MAX : static_cast<uint64_t>(round_to_dtype(v, DType::u64));
      break;
    case DType::boolean: static_cast<uint8_t*>(p)[i] = v != 0; break;
    default: store_int(p, i, dtype_, static_cast<int64_t>(round_to_dtype(v, dtype_))); break;
  }
}

std::vector<double> NDArray::to_vector() const {
  std::vector<double> r(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) r[static_cast<size_t>(i)] = get(i);
  return r;
}

std::string NDArray::type_str() const {
  std::string s = std::string(dtype_name(dtype_)) + "[";
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape_[i]);
  }
  return s + "]";
}

}  // namespace tj
