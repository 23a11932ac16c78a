#include "tensorjit/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "support/files.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

// The reference implementation's limit: a larger header is an attack or a bug.
constexpr uint64_t kMaxHeader = 100'000'000;

// The format's dtype names, both ways.
constexpr std::pair<DType, const char*> kNames[] = {
    {DType::f64, "F64"}, {DType::f32, "F32"}, {DType::f16, "F16"}, {DType::bf16, "BF16"}, {DType::i64, "I64"},
    {DType::i32, "I32"}, {DType::i16, "I16"}, {DType::i8, "I8"},   {DType::u64, "U64"},   {DType::u32, "U32"},
    {DType::u16, "U16"}, {DType::u8, "U8"},   {DType::boolean, "BOOL"}};

std::optional<DType> dtype_of(const std::string& s) {
  for (const auto& [t, name] : kNames)
    if (s == name) return t;
  return std::nullopt;
}

const char* dtype_name_of(DType t) {
  for (const auto& [d, name] : kNames)
    if (d == t) return name;
  return "?";
}

struct Mapping {
  const std::byte* data = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (data) munmap(const_cast<std::byte*>(data), size);
  }
};

}  // namespace

struct SafetensorsFile::Impl {
  std::string path;
  Mapping map;
  const std::byte* body = nullptr;  // the tensors' bytes, after the header
  std::vector<SafetensorsEntry> entries;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // per entry, within body
  std::map<std::string, size_t, std::less<>> index;
  std::map<std::string, std::string> metadata;

  [[noreturn]] void fail(const std::string& msg) const { throw Error(path + ": not a valid safetensors file: " + msg); }

  void open() {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error("cannot open '" + path + "': " + std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw Error("'" + path + "' is not a regular file");
    }
    map.size = static_cast<size_t>(st.st_size);
    if (map.size < 8) {
      ::close(fd);
      fail("shorter than its 8-byte header length");
    }
    void* p = mmap(nullptr, map.size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) throw Error("cannot map '" + path + "': " + std::strerror(errno));
    map.data = static_cast<const std::byte*>(p);
  }

  void parse() {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<uint64_t>(map.data[i]);  // little-endian
    if (n > kMaxHeader) fail("header length " + std::to_string(n) + " is over 100 MB");
    if (n > map.size - 8) fail("header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(map.size) + " bytes)");
    const char* text = reinterpret_cast<const char*>(map.data + 8);
    if (n == 0 || text[0] != '{') fail("the header is not a JSON object");
    nlohmann::json h;
    try {
      h = nlohmann::json::parse(text, text + n);
    } catch (const nlohmann::json::exception& e) {
      fail(std::string("the header is not valid JSON: ") + e.what());
    }
    if (!h.is_object()) fail("the header is not a JSON object");
    body = map.data + 8 + n;
    const uint64_t body_size = map.size - 8 - n;
    for (auto it = h.begin(); it != h.end(); ++it) {
      const std::string& name = it.key();
      const auto& v = it.value();
      if (name == "__metadata__") {
        if (!v.is_object()) fail("__metadata__ is not an object");
        for (auto m = v.begin(); m != v.end(); ++m) {
          if (!m.value().is_string()) fail("__metadata__ value '" + m.key() + "' is not a string");
          metadata[m.key()] = m.value().get<std::string>();
        }
        continue;
      }
      auto bad = [&](const std::string& msg) { fail("tensor '" + name + "': " + msg); };
      if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
        bad("needs dtype, shape and data_offsets");
      if (!v["dtype"].is_string()) bad("dtype is not a string");
      std::string ds = v["dtype"].get<std::string>();
      auto dt = dtype_of(ds);
      if (!dt) bad("dtype " + ds + " is not supported (F64 F32 F16 BF16 I64 I32 BOOL are)");
      const auto& sh = v["shape"];
      if (!sh.is_array() || sh.size() > 64) bad("shape is not a list of at most 64 sizes");
      std::vector<int64_t> shape;
      for (const auto& d : sh) {
        if (!d.is_number_integer()) bad("shape holds a non-integer");
        if (d.is_number_unsigned() ? d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) : d.get<int64_t>() < 0)
          bad("shape holds a negative or too large size");
        shape.push_back(d.get<int64_t>());
      }
      int64_t count = 0;
      try {
        count = checked_numel(shape, *dt);
      } catch (const Error& e) {
        bad(e.what());
      }
      const auto& off = v["data_offsets"];
      if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
        bad("data_offsets is not a pair of non-negative integers");
      uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
      if (b > e || e > body_size) bad("data_offsets [" + std::to_string(b) + ", " + std::to_string(e) + "] lie outside the " +
                                      std::to_string(body_size) + " data bytes");
      uint64_t want = static_cast<uint64_t>(count) * static_cast<uint64_t>(dtype_size(*dt));
      if (e - b != want) bad(std::to_string(e - b) + " data bytes for " + std::to_string(count) + " values of " + ds + " (" + std::to_string(want) + " bytes)");
      entries.push_back({name, *dt, std::move(shape)});
      ranges.emplace_back(b, e);
    }
    // As the reference reader: the ranges tile the data exactly, no overlap, no hole.
    std::vector<size_t> order(entries.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a] < ranges[b]; });
    uint64_t at = 0;
    for (size_t i : order) {
      if (ranges[i].first != at)
        fail("tensor '" + entries[i].name + "' starts at data byte " + std::to_string(ranges[i].first) + ", expected " + std::to_string(at) +
             (ranges[i].first < at ? " (overlap)" : " (a hole)"));
      at = ranges[i].second;
    }
    if (at != body_size) fail(std::to_string(body_size - at) + " data bytes after the last tensor");
    std::vector<SafetensorsEntry> sorted;
    std::vector<std::pair<uint64_t, uint64_t>> sorted_ranges;
    for (size_t i : order) sorted.push_back(std::move(entries[i])), sorted_ranges.push_back(ranges[i]);
    entries = std::move(sorted), ranges = std::move(sorted_ranges);
    for (size_t i = 0; i < entries.size(); ++i) index[entries[i].name] = i;
  }

  size_t at(std::string_view name) const {
    auto it = index.find(name);
    if (it == index.end()) throw Error(path + ": no tensor named '" + std::string(name) + "'");
    return it->second;
  }
};

SafetensorsFile::SafetensorsFile(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->open();
  impl_->parse();
}

SafetensorsFile::~SafetensorsFile() = default;
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;

const std::string& SafetensorsFile::path() const { return impl_->path; }
const std::vector<SafetensorsEntry>& SafetensorsFile::tensors() const { return impl_->entries; }
const std::map<std::string, std::string>& SafetensorsFile::metadata() const { return impl_->metadata; }

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  auto it = impl_->index.find(name);
  return it == impl_->index.end() ? nullptr : &impl_->entries[it->second];
}

std::span<const std::byte> SafetensorsFile::bytes(std::string_view name) const {
  auto [b, e] = impl_->ranges[impl_->at(name)];
  return {impl_->body + b, static_cast<size_t>(e - b)};
}

NDArray SafetensorsFile::read(std::string_view name) const {
  const SafetensorsEntry& t = impl_->entries[impl_->at(name)];
  NDArray a(t.dtype, t.shape);
  auto src = bytes(name);
  if (!src.empty()) std::memcpy(a.raw(), src.data(), src.size());
  if (t.dtype == DType::boolean)  // any nonzero byte is true; stored as 0/1
    for (int64_t i = 0; i < a.numel(); ++i) a.data<uint8_t>()[i] = a.data<uint8_t>()[i] != 0;
  return a;
}

std::map<std::string, NDArray, std::less<>> SafetensorsFile::read_all() const {
  std::map<std::string, NDArray, std::less<>> r;
  for (const auto& t : impl_->entries) r.emplace(t.name, read(t.name));
  return r;
}

void write_safetensors(const std::string& path, const std::map<std::string, NDArray, std::less<>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t at = 0;
  for (const auto& [name, a] : tensors) {
    if (name == "__metadata__") throw Error("write_safetensors: '__metadata__' is not a tensor name");
    h[name] = {{"dtype", dtype_name_of(a.dtype())}, {"shape", a.shape()}, {"data_offsets", {at, at + a.nbytes()}}};
    at += a.nbytes();
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // the data 8-byte aligned, as the Python library pads
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i) & 0xff);
  out += header;
  out.reserve(out.size() + at);
  for (const auto& [name, a] : tensors) out.append(static_cast<const char*>(a.raw()), a.nbytes());
  write_atomic(path, out);
}

}  // namespace tj
