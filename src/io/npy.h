// NumPy .npy files: read and write NDArrays, for `tjc run --input/--output`,
// `tjc bench --dump` and comparisons with numpy/PyTorch.
//
// Writes format 1.0 (2.0 when the header needs it), little-endian, C order.
// Reads formats 1.0, 2.0 and 3.0 with descr <f2 <f4 <f8 <i4 <i8 |b1 (and the
// byte-order-free |i1-style spellings numpy gives 1-byte types), C order.
// Anything else - bad magic, truncated header or data, big-endian, Fortran
// order, object or unknown dtypes, negative or overflowing shapes, a header
// over 1 MiB - is a tj::Error naming the file and the problem, never a crash.
// bf16 has no numpy dtype: writing one is an error.
#pragma once

#include <string>

#include "tensorjit/ndarray.h"

namespace tj {

NDArray read_npy(const std::string& path);
void write_npy(const std::string& path, const NDArray& a);

// The same on bytes in memory (`what` names the source in errors).
NDArray parse_npy(const std::string& bytes, const std::string& what = "npy data");
std::string format_npy(const NDArray& a);

}  // namespace tj
