#include "ir/constant.h"

#include <cstring>

#include "tensorjit/error.h"

namespace tj {

std::shared_ptr<const ConstValues> ConstValues::of(DType dtype, const std::vector<double>& values) {
  NDArray a(dtype, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) a.set(static_cast<int64_t>(i), values[i]);
  return adopt(std::move(a));
}

std::shared_ptr<const ConstValues> ConstValues::adopt(NDArray values) {
  return std::shared_ptr<const ConstValues>(new ConstValues(std::move(values)));
}

std::shared_ptr<const ConstValues> in_dtype(const std::shared_ptr<const ConstValues>& data, DType dtype) {
  if (dtype == data->dtype()) return data;
  NDArray a(dtype, {static_cast<int64_t>(data->size())});
  for (size_t i = 0; i < data->size(); ++i) a.set(static_cast<int64_t>(i), (*data)[i]);
  return ConstValues::adopt(std::move(a));
}

int64_t ConstValues::int_at(size_t i) const {
  switch (dtype()) {
    case DType::boolean: return static_cast<const uint8_t*>(raw())[i] != 0;
    default:
      if (!is_int(dtype())) throw Error("int_at of a " + std::string(dtype_name(dtype())) + " constant");
      return load_int(raw(), static_cast<int64_t>(i), dtype());  // u64: its bits
  }
}

NDArray ConstValues::to_array(const std::vector<int64_t>& shape) const {
  NDArray a(dtype(), shape);
  if (size() == static_cast<size_t>(a.numel())) {
    if (a.nbytes()) std::memcpy(a.raw(), raw(), a.nbytes());
    return a;
  }
  if (size() != 1) throw Error("constant of " + std::to_string(size()) + " values read as " + a.type_str());
  const char* v = static_cast<const char*>(raw());
  size_t w = static_cast<size_t>(dtype_size(dtype()));
  for (int64_t i = 0; i < a.numel(); ++i) std::memcpy(static_cast<char*>(a.raw()) + static_cast<size_t>(i) * w, v, w);
  return a;
}

}  // namespace tj
