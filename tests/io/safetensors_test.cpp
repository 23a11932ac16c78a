// safetensors reading and writing: every supported dtype round-trips, a
// file laid out as the Python library writes it reads, and malformed files
// are clear errors naming the problem, never crashes.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>


#include "support/scratch.h"
#include "tensorjit/error.h"
#include "tensorjit/safetensors.h"

namespace tj {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  return (fs::path(testing::scratch_dir("safetensors")) / name).string();
}

// A file of `header` (JSON) and `data`, with the length prefix.
std::string write_raw(const std::string& name, const std::string& header, const std::string& data, int64_t length = -1) {
  uint64_t n = length >= 0 ? static_cast<uint64_t>(length) : header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i) & 0xff);
  std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << out + header + data;
  return path;
}

std::string error_of(const std::string& path) {
  try {
    SafetensorsFile f(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Safetensors, EveryDtypeRoundTrips) {
  std::map<std::string, NDArray, std::less<>> in;
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64, DType::i32, DType::boolean}) {
    NDArray a(t, {2, 3});
    for (int64_t i = 0; i < a.numel(); ++i) a.set(i, t == DType::boolean ? i % 2 : i * 1.5 - 2);
    in[std::string(dtype_name(t))] = std::move(a);
  }
  in["empty"] = NDArray(DType::f32, {0, 4});
  in["scalar"] = NDArray::scalar(DType::f32, 7);
  std::string path = temp_path("all.safetensors");
  write_safetensors(path, in, {{"format", "pt"}});
  SafetensorsFile f(path);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  ASSERT_EQ(f.tensors().size(), in.size());
  for (const auto& [name, a] : in) {
    SCOPED_TRACE(name);
    ASSERT_NE(f.find(name), nullptr);
    NDArray b = f.read(name);
    EXPECT_EQ(b.dtype(), a.dtype());
    EXPECT_EQ(b.shape(), a.shape());
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
    EXPECT_EQ(f.bytes(name).size(), a.nbytes());
  }
  EXPECT_EQ(f.read_all().size(), in.size());
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_THROW(f.read("nope"), Error);
}

// As the Python library writes: keys in any order, offsets into the data,
// the header padded with spaces.
TEST(Safetensors, ReadsAHandWrittenFile) {
  float w[3] = {1.5f, -2, 0.25f};
  int64_t ids[2] = {7, -1};
  std::string data(reinterpret_cast<const char*>(ids), 16);
  data += std::string(reinterpret_cast<const char*>(w), 12);
  std::string header =
      R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[16,28]},"__metadata__":{"format":"pt"},)"
      R"("ids":{"dtype":"I64","shape":[1,2],"data_offsets":[0,16]}}   )";
  SafetensorsFile f(write_raw("hand.safetensors", header, data));
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.tensors()[0].name, "ids");  // in the order of their bytes
  NDArray a = f.read("w");
  EXPECT_EQ(a.shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ(a.data<float>()[0], 1.5f);
  EXPECT_EQ(a.data<float>()[2], 0.25f);
  EXPECT_EQ(f.read("ids").data<int64_t>()[1], -1);
}

TEST(Safetensors, MalformedFilesAreClearErrors) {
  auto t = [](const std::string& body) { return R"({"t":)" + body + "}"; };
  struct Case {
    std::string name, header, data, want;
    int64_t length = -1;
  };
  std::vector<Case> cases = {
      {"huge_header", "{}", "", "over 100 MB", 200'000'000},
      {"past_end", "{}", "", "runs past the end", 100},
      {"not_object", "[1,2]", "", "not a JSON object"},
      {"bad_json", "{\"t\":", "", "not valid JSON"},
      {"no_offsets", t(R"({"dtype":"F32","shape":[1]})"), "abcd", "needs dtype, shape and data_offsets"},
      {"dtype", t(R"({"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]})"), "abcd", "dtype F8_E4M3 is not supported"},
      {"negative", t(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"), "abcd", "negative or too large"},
      {"overflow", t(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})"), "abcd", "too large"},
      {"size", t(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})"), "abcd", "4 data bytes for 2 values of F32 (8 bytes)"},
      {"outside", t(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})"), "abcd", "outside the 4 data bytes"},
      {"reversed", t(R"({"dtype":"F32","shape":[0],"data_offsets":[4,0]})"), "abcd", "outside"},
      {"hole", t(R"({"dtype":"F32","shape":[1],"data_offsets":[4,8]})"), "abcdefgh", "a hole"},
      {"trailing", t(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})"), "abcdefgh", "4 data bytes after the last tensor"},
      {"metadata", R"({"__metadata__":{"a":1}})", "", "is not a string"},
  };
  cases.push_back({"overlap",
                   R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                   "abcdefgh", "overlap"});
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::string e = error_of(write_raw(c.name + ".safetensors", c.header, c.data, c.length));
    EXPECT_NE(e.find(c.want), std::string::npos) << e;
    EXPECT_NE(e.find(c.name + ".safetensors"), std::string::npos) << e;
  }
  std::string short_file = temp_path("short.safetensors");
  std::ofstream(short_file, std::ios::binary) << "abcd";
  EXPECT_NE(error_of(short_file).find("shorter than its 8-byte header length"), std::string::npos);
  EXPECT_NE(error_of(temp_path("missing.safetensors")).find("cannot open"), std::string::npos);
  EXPECT_NE(error_of(fs::temp_directory_path().string()).find("not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace tj
