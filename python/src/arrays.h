// Arrays across the boundary, without copies: numpy arrays (and anything
// with DLPack: torch tensors, jax arrays) in as NDArray views, NDArrays out
// as numpy arrays that own them.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <string>
#include <vector>

#include "tensorjit/ndarray.h"

namespace tj::py {

namespace nb = nanobind;

using AnyArray = nb::ndarray<nb::device::cpu>;

// The dtype of an array's elements; a tj::Error naming `what` for types
// tensorjit has no dtype for.
DType dtype_of(const nb::dlpack::dtype& d, const std::string& what);
DType dtype_from_name(const std::string& name);

// A view of `a` (no copy): row-major only; anything else is a tj::Error
// that says how to make one ("np.ascontiguousarray").
NDArray view_of(const AnyArray& a, const std::string& what);
// A numpy array that owns `a` (moved, no copy).
nb::object to_numpy(NDArray&& a);
// The fast path's view of an exact numpy array (row-major, aligned, native
// byte order, a dtype tensorjit has), through numpy's C API; false for
// anything else (as_array converts it or says why not).
bool numpy_view(PyObject* o, NDArray* out);
PyTypeObject* numpy_array_type();  // numpy.ndarray
// Python values to arrays: an array-like object as a view, or a Python
// scalar or list through numpy (a copy).
NDArray as_array(nb::handle obj, const std::string& what);
// A weight as the compilation keeps it. borrow: a view of obj's memory that
// holds a reference to obj (the caller promises not to change it, or to
// pass another object when it does: the torch backend's version guard);
// otherwise one copy, which every later copy of the array shares.
NDArray kept_array(nb::handle obj, const std::string& what, bool borrow);

void bind_arrays(nb::module_& m);

}  // namespace tj::py
