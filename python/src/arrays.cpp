#include "arrays.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "tensorjit/error.h"

namespace tj::py {

namespace {

using Code = nb::dlpack::dtype_code;

struct Entry {
  DType t;
  Code code;
  uint8_t bits;
  const char* numpy;
};

// One row per dtype numpy (and DLPack) has.
constexpr Entry kTable[] = {
    {DType::f32, Code::Float, 32, "float32"}, {DType::f64, Code::Float, 64, "float64"}, {DType::f16, Code::Float, 16, "float16"},
    {DType::bf16, Code::Bfloat, 16, nullptr}, {DType::i8, Code::Int, 8, "int8"},          {DType::i16, Code::Int, 16, "int16"},
    {DType::i32, Code::Int, 32, "int32"},     {DType::i64, Code::Int, 64, "int64"},        {DType::u8, Code::UInt, 8, "uint8"},
    {DType::u16, Code::UInt, 16, "uint16"},   {DType::u32, Code::UInt, 32, "uint32"},      {DType::u64, Code::UInt, 64, "uint64"},
    {DType::boolean, Code::Bool, 8, "bool"},
};

}  // namespace

DType dtype_of(const nb::dlpack::dtype& d, const std::string& what) {
  if (d.lanes == 1)
    for (const Entry& e : kTable)
      if (static_cast<uint8_t>(e.code) == d.code && e.bits == d.bits) return e.t;
  throw Error(what + ": arrays of this element type (DLPack code " + std::to_string(d.code) + ", " + std::to_string(d.bits) +
              " bits) are not supported");
}

nb::dlpack::dtype dlpack_of(DType t) {
  for (const Entry& e : kTable)
    if (e.t == t) return nb::dlpack::dtype{static_cast<uint8_t>(e.code), e.bits, 1};
  throw Error(std::string(dtype_name(t)) + " has no DLPack type");
}

const char* numpy_name(DType t) {
  for (const Entry& e : kTable)
    if (e.t == t && e.numpy) return e.numpy;
  throw Error(std::string(dtype_name(t)) + " has no numpy type");
}

DType dtype_from_name(const std::string& name) {
  for (const Entry& e : kTable)
    if (e.numpy && name == e.numpy) return e.t;
  if (auto t = parse_dtype(name)) return *t;
  throw Error("unknown dtype '" + name + "' (numpy's names: float32, int64, bool, ...; or tensorjit's: f32, bf16, ...)");
}

NDArray view_of(const AnyArray& a, const std::string& what) {
  DType t = dtype_of(a.dtype(), what);
  std::vector<int64_t> shape(a.ndim());
  int64_t expect = 1;
  bool contiguous = true;
  for (size_t i = a.ndim(); i-- > 0;) {
    shape[i] = static_cast<int64_t>(a.shape(i));
    if (shape[i] != 1 && a.stride(i) != expect) contiguous = false;
    expect *= shape[i];
  }
  if (!contiguous)
    throw Error(what + ": the array is not contiguous (row-major); pass np.ascontiguousarray(x), which copies it");
  return NDArray::view(t, std::move(shape), a.data());
}

nb::object to_numpy(NDArray&& a) {
  const nb::dlpack::dtype dt = dlpack_of(a.dtype());
  if (a.dtype() == DType::bf16) throw Error("a bf16 result has no numpy type; cast it to f32 in the function");
  auto* owned = new NDArray(std::move(a));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<NDArray*>(p); });
  std::vector<size_t> shape(owned->shape().begin(), owned->shape().end());
  return nb::cast(nb::ndarray<nb::numpy>(owned->raw(), shape.size(), shape.data(), owner, nullptr, dt));
}

NDArray as_array(nb::handle obj, const std::string& what) {
  AnyArray a;
  if (nb::try_cast(obj, a, false)) return view_of(a, what);
  // A Python scalar or list: through numpy, copied (the temporary goes away).
  nb::object np = nb::module_::import_("numpy").attr("asarray")(obj);
  if (!nb::try_cast(np, a, false))
    throw Error(what + ": arrays of dtype " + nb::cast<std::string>(np.attr("dtype").attr("__str__")()) +
                " are not supported (numbers and bools are)");
  NDArray v = view_of(a, what);
  return NDArray::copy_of(v.dtype(), v.shape(), v.raw(), v.nbytes());
}

void bind_arrays(nb::module_& m) {
  // Round trips, for tests: an array in as a view and back out as a copy.
  m.def("_roundtrip", [](nb::handle x) {
    NDArray v = as_array(x, "x");
    return to_numpy(NDArray::copy_of(v.dtype(), v.shape(), v.raw(), v.nbytes()));
  });
  m.def("_data_pointer", [](nb::handle x) { return reinterpret_cast<uintptr_t>(as_array(x, "x").raw()); });
}

}  // namespace tj::py
