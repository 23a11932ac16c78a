#include "arrays.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

// numpy's C API, for results: an array over memory it does not own, made in
// one call (nanobind's export goes through numpy.asarray and the buffer
// protocol, about 1 us more per result).
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include "tensorjit/error.h"

namespace tj::py {

namespace {

using Code = nb::dlpack::dtype_code;

struct Entry {
  DType t;
  Code code;
  uint8_t bits;
  const char* numpy;
  int npy;  // numpy's type number (-1: none)
};

// One row per dtype numpy (and DLPack) has.
constexpr Entry kTable[] = {
    {DType::f32, Code::Float, 32, "float32", NPY_FLOAT32},  {DType::f64, Code::Float, 64, "float64", NPY_FLOAT64},
    {DType::f16, Code::Float, 16, "float16", NPY_FLOAT16},  {DType::bf16, Code::Bfloat, 16, nullptr, -1},
    {DType::i8, Code::Int, 8, "int8", NPY_INT8},            {DType::i16, Code::Int, 16, "int16", NPY_INT16},
    {DType::i32, Code::Int, 32, "int32", NPY_INT32},        {DType::i64, Code::Int, 64, "int64", NPY_INT64},
    {DType::u8, Code::UInt, 8, "uint8", NPY_UINT8},         {DType::u16, Code::UInt, 16, "uint16", NPY_UINT16},
    {DType::u32, Code::UInt, 32, "uint32", NPY_UINT32},     {DType::u64, Code::UInt, 64, "uint64", NPY_UINT64},
    {DType::boolean, Code::Bool, 8, "bool", NPY_BOOL},
};

int npy_type(DType t) {
  for (const Entry& e : kTable)
    if (e.t == t) return e.npy;
  return -1;
}

}  // namespace

DType dtype_of(const nb::dlpack::dtype& d, const std::string& what) {
  if (d.lanes == 1)
    for (const Entry& e : kTable)
      if (static_cast<uint8_t>(e.code) == d.code && e.bits == d.bits) return e.t;
  throw Error(what + ": arrays of this element type (DLPack code " + std::to_string(d.code) + ", " + std::to_string(d.bits) +
              " bits) are not supported");
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
  if (expect == 0) contiguous = true;  // no elements: no stride is ever used (numpy's are arbitrary)
  if (!contiguous)
    throw Error(what + ": the array is not contiguous (row-major); pass np.ascontiguousarray(x), which copies it");
  return NDArray::view(t, std::move(shape), a.data());
}

nb::object to_numpy(NDArray&& a) {
  const int type = npy_type(a.dtype());
  if (type < 0) throw Error("a " + std::string(dtype_name(a.dtype())) + " result has no numpy type; cast it to f32 in the function");
  const size_t rank = a.shape().size();
  if (rank > NPY_MAXDIMS) throw Error("a result of rank " + std::to_string(rank) + " is more than numpy takes");
  npy_intp dims[NPY_MAXDIMS];
  for (size_t i = 0; i < rank; ++i) dims[i] = static_cast<npy_intp>(a.shape()[i]);
  auto* owned = new NDArray(std::move(a));
  // The capsule owns the NDArray; the array keeps the capsule (its base).
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<NDArray*>(p); });
  static char empty;  // numpy allocates for a null pointer: an empty result points here
  void* data = owned->raw() ? owned->raw() : &empty;
  PyObject* r = PyArray_New(&PyArray_Type, static_cast<int>(rank), dims, type, nullptr, data, 0, NPY_ARRAY_CARRAY, nullptr);
  if (!r) nb::raise_python_error();
  if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(r), owner.release().ptr()) != 0) {
    Py_DECREF(r);
    nb::raise_python_error();
  }
  return nb::steal(r);
}

PyTypeObject* numpy_array_type() { return &PyArray_Type; }

bool numpy_view(PyObject* o, NDArray* out) {
  if (!PyArray_CheckExact(o)) return false;
  auto* a = reinterpret_cast<PyArrayObject*>(o);
  if (!PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISNOTSWAPPED(a) || !PyArray_ISALIGNED(a)) return false;
  DType t;
  switch (PyArray_TYPE(a)) {
    case NPY_FLOAT32: t = DType::f32; break;
    case NPY_FLOAT64: t = DType::f64; break;
    case NPY_FLOAT16: t = DType::f16; break;
    case NPY_BOOL: t = DType::boolean; break;
    default: {
      const int type = PyArray_TYPE(a);
      const bool is_signed = PyTypeNum_ISSIGNED(type), is_unsigned = PyTypeNum_ISUNSIGNED(type);
      if (!is_signed && !is_unsigned) return false;
      switch (PyArray_ITEMSIZE(a)) {
        case 1: t = is_signed ? DType::i8 : DType::u8; break;
        case 2: t = is_signed ? DType::i16 : DType::u16; break;
        case 4: t = is_signed ? DType::i32 : DType::u32; break;
        case 8: t = is_signed ? DType::i64 : DType::u64; break;
        default: return false;
      }
    }
  }
  const npy_intp* dims = PyArray_DIMS(a);
  *out = NDArray::view(t, std::vector<int64_t>(dims, dims + PyArray_NDIM(a)), PyArray_DATA(a));
  return true;
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

NDArray kept_array(nb::handle obj, const std::string& what, bool borrow) {
  AnyArray a;
  if (borrow && nb::try_cast(obj, a, false)) {
    NDArray v = view_of(a, what);
    // The reference is dropped with the last view. Views live in programs
    // that Python objects own, so that is with the GIL held; once the
    // interpreter is gone the reference is left.
    std::shared_ptr<const void> owner(obj.inc_ref().ptr(), [](const void* p) {
      if (!Py_IsInitialized()) return;
      nb::gil_scoped_acquire gil;
      Py_DECREF(static_cast<PyObject*>(const_cast<void*>(p)));
    });
    return NDArray::view(v.dtype(), v.shape(), v.raw(), std::move(owner));
  }
  NDArray v = as_array(obj, what);
  return NDArray::shared(NDArray::copy_of(v.dtype(), v.shape(), v.raw(), v.nbytes()));
}

void bind_arrays(nb::module_& m) {
  if (_import_array() < 0) nb::raise_python_error();  // numpy's C API table
  // Round trips, for tests: an array in as a view and back out as a copy.
  m.def("_roundtrip", [](nb::handle x) {
    NDArray v = as_array(x, "x");
    return to_numpy(NDArray::copy_of(v.dtype(), v.shape(), v.raw(), v.nbytes()));
  });
  m.def("_data_pointer", [](nb::handle x) { return reinterpret_cast<uintptr_t>(as_array(x, "x").raw()); });
}

}  // namespace tj::py
