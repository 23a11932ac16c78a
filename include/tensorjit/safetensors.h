// safetensors files, the weight format of Hugging Face models: an 8-byte
// little-endian header length, a JSON header giving each tensor's dtype,
// shape and byte range, then the tensors' bytes.
//
// Reading maps the file into memory and checks the whole header first:
// anything malformed (a truncated file, a header that is not a JSON object
// or is over 100 MB, an unknown or unsupported dtype, a negative or
// overflowing shape, byte ranges that do not match the shape, overlap,
// leave holes or run past the end) is a tj::Error naming the file and the
// problem, never a crash. Supported dtypes: F64 F32 F16 BF16 I64 I32 BOOL.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorjit/ndarray.h"

namespace tj {

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;

  const std::string& path() const;
  // In the order of their bytes in the file.
  const std::vector<SafetensorsEntry>& tensors() const;
  const SafetensorsEntry* find(std::string_view name) const;  // nullptr if absent
  // The tensor's bytes, as mapped (no copy; not necessarily aligned).
  std::span<const std::byte> bytes(std::string_view name) const;
  // A copy in the tensor's own dtype (aligned, as every NDArray).
  NDArray read(std::string_view name) const;
  // Every tensor, by name.
  std::map<std::string, NDArray, std::less<>> read_all() const;
  // The header's "__metadata__" (string to string), if any.
  const std::map<std::string, std::string>& metadata() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes `tensors` (sorted by name, as the Python library does) with an
// optional string metadata map; throws tj::Error when the file cannot be
// written. The write is atomic: a reader never sees half a file.
void write_safetensors(const std::string& path, const std::map<std::string, NDArray, std::less<>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace tj
