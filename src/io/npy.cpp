#include "io/npy.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include "tensorjit/error.h"

namespace tj {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMaxHeader = size_t{1} << 20;
constexpr int64_t kMaxBytes = int64_t{1} << 46;  // far beyond any file we read; keeps products in range

std::optional<DType> descr_dtype(const std::string& d) {
  if (d == "<f2") return DType::f16;
  if (d == "<f4") return DType::f32;
  if (d == "<f8") return DType::f64;
  if (d == "<i4") return DType::i32;
  if (d == "<i8") return DType::i64;
  if (d == "|i1" || d == "i1") return DType::i8;
  if (d == "|u1" || d == "u1") return DType::u8;
  if (d == "<i2") return DType::i16;
  if (d == "<u2") return DType::u16;
  if (d == "<u4") return DType::u32;
  if (d == "<u8") return DType::u64;
  if (d == "|b1" || d == "b1" || d == "?" || d == "<b1") return DType::boolean;
  return std::nullopt;
}

const char* dtype_descr(DType t) {
  switch (t) {
    case DType::f16: return "<f2";
    case DType::f32: return "<f4";
    case DType::f64: return "<f8";
    case DType::i32: return "<i4";
    case DType::i64: return "<i8";
    case DType::boolean: return "|b1";
    case DType::i8: return "|i1";
    case DType::u8: return "|u1";
    case DType::i16: return "<i2";
    case DType::u16: return "<u2";
    case DType::u32: return "<u4";
    case DType::u64: return "<u8";
    case DType::i4: case DType::i2: return "|i1";  // numpy has no narrower integers: one byte each, as in memory
    case DType::u4: case DType::u2: return "|u1";
    case DType::bf16:  // no numpy type (ml_dtypes' are not in the format)
    case DType::f8e4m3fn: case DType::f8e4m3fnuz: case DType::f8e5m2: case DType::f8e5m2fnuz: case DType::f8e8m0: case DType::f4e2m1:
      return nullptr;
  }
  return nullptr;
}

// The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& what) : s_(text), what_(what) {}

  void parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (!peek('}')) {
      std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        skip_space();
        if (peek('[')) fail("structured dtypes are not supported");
        *descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order") {
        *fortran = boolean();
        have_order = true;
      } else if (key == "shape") {
        *shape = tuple();
        have_shape = true;
      } else {
        fail("unknown header key '" + key + "'");
      }
      if (!peek('}')) expect(',');
    }
    expect('}');
    skip_space();
    if (i_ != s_.size()) fail("text after the header dict");
    if (!have_descr || !have_order || !have_shape) fail("header lacks descr, fortran_order or shape");
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const { throw Error(what_ + ": bad .npy header: " + msg); }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool peek(char c) {
    skip_space();
    return i_ < s_.size() && s_[i_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string_literal() {
    skip_space();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) fail("expected a string");
    char q = s_[i_++];
    size_t end = s_.find(q, i_);
    if (end == std::string::npos) fail("unterminated string");
    std::string v = s_.substr(i_, end - i_);
    i_ = end + 1;
    return v;
  }
  bool boolean() {
    skip_space();
    if (s_.compare(i_, 4, "True") == 0) return i_ += 4, true;
    if (s_.compare(i_, 5, "False") == 0) return i_ += 5, false;
    fail("fortran_order must be True or False");
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> dims;
    expect('(');
    while (!peek(')')) {
      skip_space();
      if (i_ < s_.size() && s_[i_] == '-') fail("negative dimension in shape");
      if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') fail("shape must be a tuple of integers");
      int64_t v = 0;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (v > (kMaxBytes - 9) / 10) fail("dimension too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2 longs
      dims.push_back(v);
      if (dims.size() > 64) fail("more than 64 dimensions");
      if (!peek(')')) expect(',');
    }
    expect(')');
    return dims;
  }

  const std::string& s_;
  const std::string& what_;
  size_t i_ = 0;
};

uint32_t read_le(const std::string& b, size_t at, int bytes) {
  uint32_t v = 0;
  for (int k = bytes - 1; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(b[at + static_cast<size_t>(k)]);
  return v;
}

}  // namespace

NDArray parse_npy(const std::string& b, const std::string& what) {
  if (b.size() < 8 || b.compare(0, 6, kMagic, 6) != 0) throw Error(what + ": not a .npy file (bad magic)");
  int major = static_cast<unsigned char>(b[6]);
  if (major < 1 || major > 3) throw Error(what + ": unsupported .npy format version " + std::to_string(major));
  size_t len_bytes = major == 1 ? 2 : 4;
  if (b.size() < 8 + len_bytes) throw Error(what + ": truncated .npy header");
  size_t header_len = read_le(b, 8, static_cast<int>(len_bytes));
  if (header_len > kMaxHeader) throw Error(what + ": .npy header of " + std::to_string(header_len) + " bytes is too large");
  size_t start = 8 + len_bytes;
  if (b.size() - start < header_len) throw Error(what + ": truncated .npy header");
  std::string header = b.substr(start, header_len);
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
  HeaderParser(header, what).parse(&descr, &fortran, &shape);
  if (fortran) throw Error(what + ": fortran_order True is not supported (save a C-contiguous array)");
  if (!descr.empty() && descr[0] == '>') throw Error(what + ": big-endian dtype '" + descr + "' is not supported");
  if (descr.find('O') != std::string::npos) throw Error(what + ": object arrays are not supported");
  auto dt = descr_dtype(descr);
  if (!dt) throw Error(what + ": unsupported dtype '" + descr + "' (supported: <f2 <f4 <f8 <i4 <i8 |b1)");
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d != 0 && numel > kMaxBytes / dtype_size(*dt) / d) throw Error(what + ": shape too large");
    numel *= d;
  }
  size_t data = start + header_len;
  size_t nbytes = static_cast<size_t>(numel) * static_cast<size_t>(dtype_size(*dt));
  if (b.size() - data < nbytes) throw Error(what + ": truncated data (" + std::to_string(b.size() - data) + " of " +
                                            std::to_string(nbytes) + " bytes)");
  if (b.size() - data > nbytes) throw Error(what + ": " + std::to_string(b.size() - data - nbytes) + " bytes after the data");
  NDArray a(*dt, shape);
  if (nbytes) std::memcpy(a.raw(), b.data() + data, nbytes);
  if (*dt == DType::boolean)
    for (int64_t i = 0; i < numel; ++i) a.data<uint8_t>()[i] = a.data<uint8_t>()[i] != 0;
  return a;
}

std::string format_npy(const NDArray& a) {
  const char* descr = dtype_descr(a.dtype());
  if (!descr) throw Error("write_npy: " + a.type_str() + " has no .npy dtype (convert bf16 to f32 first)");
  std::string shape = "(";
  for (int64_t d : a.shape()) shape += std::to_string(d) + (a.shape().size() == 1 ? "," : ", ");
  if (a.shape().size() > 1) shape.resize(shape.size() - 2);
  shape += ")";
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  bool v2 = 10 + header.size() + 1 > 65535;
  size_t prefix = v2 ? 12 : 10;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out(kMagic, 6);
  out += v2 ? '\x02' : '\x01';
  out += '\x00';
  for (size_t k = 0; k < (v2 ? 4u : 2u); ++k) out += static_cast<char>((header.size() >> (8 * k)) & 0xff);
  out += header;
  out.append(static_cast<const char*>(a.raw()), a.nbytes());
  return out;
}

NDArray read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open '" + path + "'");
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw Error("cannot read '" + path + "'");
  return parse_npy(bytes, path);
}

void write_npy(const std::string& path, const NDArray& a) {
  std::string bytes = format_npy(a);
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error("cannot write '" + path + "'");
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) throw Error("cannot write '" + path + "'");
}

}  // namespace tj
