// .npy reading and writing: every dtype round-trips; malformed files are
// clear errors, never crashes.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "io/npy.h"
#include "tensorjit/error.h"

namespace tj {
namespace {

std::string npy(const std::string& header, const std::string& data = "", char major = 1) {
  std::string out = std::string("\x93NUMPY", 6) + major + '\0';
  size_t n = header.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major > 1) out += std::string(2, '\0');
  return out + header + data;
}

std::string error_of(const std::string& bytes) {
  try {
    parse_npy(bytes, "x.npy");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Npy, EveryDtypeRoundTrips) {
  for (DType t : {DType::f16, DType::f32, DType::f64, DType::i32, DType::i64, DType::boolean}) {
    NDArray a(t, {2, 3});
    for (int64_t i = 0; i < a.numel(); ++i) a.set(i, t == DType::boolean ? i % 2 : i * 1.5 - 2);
    NDArray b = parse_npy(format_npy(a));
    EXPECT_EQ(b.dtype(), t);
    EXPECT_EQ(b.shape(), a.shape());
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << dtype_name(t);
  }
  NDArray ext(DType::i64, {3});
  ext.data<int64_t>()[0] = std::numeric_limits<int64_t>::min();
  ext.data<int64_t>()[1] = std::numeric_limits<int64_t>::max();
  ext.data<int64_t>()[2] = -1;
  std::string path = ::testing::TempDir() + "npy_ext.npy";
  write_npy(path, ext);
  NDArray back = read_npy(path);
  EXPECT_EQ(back.data<int64_t>()[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(back.data<int64_t>()[1], std::numeric_limits<int64_t>::max());
  for (std::vector<int64_t> shape : {std::vector<int64_t>{}, {0}, {5}, {1, 0, 3}}) {
    NDArray s(DType::f32, shape);
    EXPECT_EQ(parse_npy(format_npy(s)).shape(), shape);
  }
  EXPECT_NE(std::string(format_npy(NDArray(DType::f32, {})), 10).find("'shape': ()"), std::string::npos);
  EXPECT_NE(format_npy(NDArray(DType::f32, {4})).find("'shape': (4,)"), std::string::npos);
  EXPECT_NE(format_npy(NDArray(DType::f32, {4, 2})).find("'shape': (4, 2)"), std::string::npos);
}

TEST(Npy, ReadsNumpyHeadersOfEveryVersion) {
  std::string data(8, '\0');
  data[0] = 1, data[4] = 2;
  for (char major : {'\1', '\2', '\3'}) {
    NDArray a = parse_npy(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }          \n", data, major));
    EXPECT_EQ(a.dtype(), DType::i32);
    EXPECT_EQ(a.data<int32_t>()[1], 2);
  }
  NDArray b = parse_npy(npy("{\"shape\": (1, 1), \"fortran_order\": False, \"descr\": \"|b1\"}\n", std::string(1, '\x07')));
  EXPECT_EQ(b.data<uint8_t>()[0], 1);  // normalized
}

TEST(Npy, MalformedFilesAreClearErrors) {
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
  const std::string eight(8, '\0');
  struct Case {
    std::string bytes, message;
  };
  std::vector<Case> cases = {
      {"", "bad magic"},
      {"PK\x03\x04zip file", "bad magic"},
      {std::string("\x93NUMPY\x01", 7), "bad magic"},
      {std::string("\x93NUMPY\x04\x00\x10\x00", 10), "format version 4"},
      {std::string("\x93NUMPY\x01\x00\x10", 9), "truncated .npy header"},
      {npy(ok, eight).substr(0, 30), "truncated .npy header"},
      {npy(ok, "abc"), "truncated data (3 of 8 bytes)"},
      {npy(ok, eight + "x"), "1 bytes after the data"},
      {npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", eight), "big-endian"},
      {npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", eight), "fortran_order True"},
      {npy("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", eight), "object arrays"},
      {npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", eight), "unsupported dtype '<c8'"},
      {npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", eight), "structured"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", eight), "negative dimension"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"), "dimension too large"},
      {npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"), "shape too large"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,), }"), "expected ','"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (x,), }"), "tuple of integers"},
      {npy("{'descr': '<f4', 'fortran_order': False}"), "lacks"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}"), "unknown header key 'x'"},
      {npy("{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }"), "bad .npy header"},
      {npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }"), "True or False"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } trailing"), "text after"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2"), "bad .npy header"},
      {std::string("\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12), "too large"},
  };
  for (const auto& c : cases) {
    std::string e = error_of(c.bytes);
    EXPECT_NE(e.find("x.npy: "), std::string::npos) << e;
    EXPECT_NE(e.find(c.message), std::string::npos) << "want '" << c.message << "', got: " << e;
  }
  // Every truncation of a valid file is an error, not a crash.
  std::string whole = npy(ok, eight);
  for (size_t n = 0; n < whole.size(); ++n) EXPECT_NE(error_of(whole.substr(0, n)), "no error") << n;
  EXPECT_THROW(read_npy("/nonexistent/x.npy"), Error);
  EXPECT_THROW(write_npy(::testing::TempDir() + "bf16.npy", NDArray(DType::bf16, {2})), Error);
  EXPECT_THROW(write_npy("/nonexistent/dir/x.npy", NDArray(DType::f32, {2})), Error);
}

}  // namespace
}  // namespace tj
