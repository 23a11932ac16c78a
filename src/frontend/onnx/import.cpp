// Reading a ModelProto: opset check, inputs, initializers, nodes in order.
#include "frontend/onnx/import.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <limits>
#include <map>
#include <utility>

#include <onnx/defs/schema.h>  // the official operator schemas (libonnx): op versions

#include "frontend/onnx/context.h"
#include "reference/interpreter.h"
#include "support/log.h"
#include "tensorjit/error.h"

namespace tj::onnx_import {

namespace {
std::string where(const onnx::NodeProto* node) {
  return node ? node->op_type() + " node '" + node->name() + "'" : std::string("graph");
}
}  // namespace

void Ctx::fail(const std::string& msg) const { throw Error("onnx: " + where(node) + ": " + msg); }
void Ctx::unsupported(const std::string& msg) const { throw Unsupported("onnx: " + where(node) + ": " + msg); }

bool Ctx::has_input(size_t i) const { return static_cast<int>(i) < node->input_size() && !node->input(static_cast<int>(i)).empty(); }

const Value& Ctx::input(size_t i) const {
  if (!has_input(i)) fail("missing operand " + std::to_string(i));
  auto it = values.find(node->input(static_cast<int>(i)));
  if (it == values.end()) fail("operand '" + node->input(static_cast<int>(i)) + "' is not defined before it is used");
  return it->second;
}

const NDArray& Ctx::known(size_t i, const char* what) const {
  const Value& v = input(i);
  if (!v.known) {
    MustBeKnown e("onnx: " + where(node) + ": " + what + " (operand " + std::to_string(i) + ") must be known when the model is imported");
    e.operand = node->input(static_cast<int>(i));
    throw e;
  }
  return *v.known;
}

void Ctx::require_known(const std::vector<size_t>& operands, const char* what) const {
  std::vector<std::string> unknown;
  for (size_t i : operands)
    if (has_input(i) && !input(i).known && !input(i).dims) unknown.push_back(node->input(static_cast<int>(i)));
  if (unknown.empty()) return;
  MustBeKnown e("onnx: " + where(node) + ": " + what + " (" + unknown.front() + (unknown.size() > 1 ? ", ..." : "") + ") must be known when the model is imported");
  e.operand = unknown.front();
  e.others.assign(unknown.begin() + 1, unknown.end());
  throw e;
}

std::vector<std::string> MustBeKnown::deciding() const {
  std::vector<std::string> r;
  for (const auto& [name, type] : inputs) {
    auto n = numel_const(type.shape);
    if (((is_int(type.dtype) || type.dtype == DType::boolean) && n && *n <= 4096) || name == operand ||
        std::find(others.begin(), others.end(), name) != others.end())
      r.push_back(name);
  }
  return r;
}

std::vector<int64_t> Ctx::known_ints(size_t i, const char* what) const {
  const NDArray& a = known(i, what);
  if (!is_int(a.dtype())) fail(std::string(what) + " must be integers, got " + a.type_str());
  std::vector<int64_t> r;
  for (int64_t k = 0; k < a.numel(); ++k) r.push_back(a.dtype() == DType::i64 ? a.data<int64_t>()[k] : a.data<int32_t>()[k]);
  return r;
}

std::vector<Dim> Ctx::known_dims(size_t i, const char* what) const {
  const Value& v = input(i);
  if (v.dims) return *v.dims;
  std::vector<Dim> r;
  for (int64_t k : known_ints(i, what)) r.push_back(Dim(k));
  return r;
}

const onnx::AttributeProto* Ctx::attr(const std::string& name) const {
  for (const auto& a : node->attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t Ctx::attr_int(const std::string& name, int64_t def) const {
  const auto* a = attr(name);
  return a ? a->i() : def;
}

double Ctx::attr_float(const std::string& name, double def) const {
  const auto* a = attr(name);
  return a ? a->f() : def;
}

std::vector<int64_t> Ctx::attr_ints(const std::string& name, std::vector<int64_t> def) const {
  const auto* a = attr(name);
  if (!a) return def;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

DType dtype_of_onnx(int32_t t, const std::string& where) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return DType::f32;
    case onnx::TensorProto::DOUBLE: return DType::f64;
    case onnx::TensorProto::FLOAT16: return DType::f16;
    case onnx::TensorProto::BFLOAT16: return DType::bf16;
    case onnx::TensorProto::INT32: return DType::i32;
    case onnx::TensorProto::INT64: return DType::i64;
    case onnx::TensorProto::BOOL: return DType::boolean;
    case onnx::TensorProto::INT8: return DType::i8;
    case onnx::TensorProto::UINT8: return DType::u8;
    case onnx::TensorProto::INT16: return DType::i16;
    case onnx::TensorProto::UINT16: return DType::u16;
    case onnx::TensorProto::UINT32: return DType::u32;
    case onnx::TensorProto::UINT64: return DType::u64;
    // Newer than Debian's onnx.proto (1.12): by number.
    case 17: return DType::f8e4m3fn;
    case 18: return DType::f8e4m3fnuz;
    case 19: return DType::f8e5m2;
    case 20: return DType::f8e5m2fnuz;
    case 21: return DType::u4;
    case 22: return DType::i4;
    case 23: return DType::f4e2m1;
    case 24: return DType::f8e8m0;
    case 25: return DType::u2;
    case 26: return DType::i2;
    default:
      throw Unsupported("onnx: " + where + ": element type " + std::to_string(t) + " (" + onnx::TensorProto::DataType_Name(t) +
                  ") is not supported (strings and complex numbers are not)");
  }
}

namespace {

// An external-data file, mapped once however many initializers it holds
// and for as long as any of their arrays lives. The mapping is private and
// writable: a write through an array changes this process's copy of the
// page, never the file. (Like every mapped weight file, it must not be
// truncated while mapped.)
struct FileMapping {
  void* data = nullptr;
  size_t size = 0;
  FileMapping() = default;
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;
  ~FileMapping() {
    if (data) ::munmap(data, size);
  }
};

// The files mapped by the import under way on this thread.
struct ExternalFiles {
  static thread_local std::map<std::pair<dev_t, ino_t>, std::shared_ptr<const FileMapping>>* current;
  std::map<std::pair<dev_t, ino_t>, std::shared_ptr<const FileMapping>> files, *outer = current;
  ExternalFiles() { current = &files; }
  ~ExternalFiles() { current = outer; }
  ExternalFiles(const ExternalFiles&) = delete;
  ExternalFiles& operator=(const ExternalFiles&) = delete;
};
thread_local std::map<std::pair<dev_t, ino_t>, std::shared_ptr<const FileMapping>>* ExternalFiles::current = nullptr;

std::shared_ptr<const FileMapping> map_file(const std::filesystem::path& file, const std::string& what) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("onnx: " + what + ": external data file '" + file.string() + "' cannot be opened: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("onnx: " + what + ": external data file '" + file.string() + "' is not a regular file");
  }
  // The same file maps once per import: its initializers share the mapping
  // (a later import maps it again, so writes through one import's arrays
  // are not seen by the next).
  using Key = std::pair<dev_t, ino_t>;
  std::map<Key, std::shared_ptr<const FileMapping>>* shared = ExternalFiles::current;
  Key key{st.st_dev, st.st_ino};
  if (shared)
    if (auto it = shared->find(key); it != shared->end()) {
      ::close(fd);
      return it->second;
    }
  auto m = std::make_shared<FileMapping>();
  m->size = static_cast<size_t>(st.st_size);
  void* p = m->size ? ::mmap(nullptr, m->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0) : nullptr;
  ::close(fd);
  if (p == MAP_FAILED) throw Error("onnx: " + what + ": cannot map external data file '" + file.string() + "': " + std::strerror(errno));
  m->data = p;
  if (shared) (*shared)[key] = m;
  return m;
}

// The 4- and 2-bit types are packed in ONNX files, low bits first: the
// bits per element, or 0 for the others.
int packed_bits(DType dt) {
  switch (dt) {
    case DType::i4: case DType::u4: case DType::f4e2m1: return 4;
    case DType::i2: case DType::u2: return 2;
    default: return 0;
  }
}

uint64_t packed_bytes(int64_t numel, int bits) { return (static_cast<uint64_t>(numel) * static_cast<uint64_t>(bits) + 7) / 8; }

// One byte per element (the 4- and 2-bit integers sign-extended).
// The data's size is checked before the array is allocated: a corrupt
// file's dims must not ask for terabytes.
NDArray unpack(const uint8_t* p, uint64_t bytes, DType dt, const std::vector<int64_t>& shape, const std::string& what) {
  const int bits = packed_bits(dt), per = 8 / bits;
  const uint64_t want = packed_bytes(checked_numel(shape, dt), bits);
  if (bytes != want)
    throw Error("onnx: " + what + ": " + std::to_string(bytes) + " bytes of packed data for " + std::string(dtype_name(dt)) +
                shape_str(Shape(shape.begin(), shape.end())) + " (" + std::to_string(want) + " bytes)");
  NDArray a(dt, shape);
  for (int64_t i = 0; i < a.numel(); ++i) {
    const int64_t v = (p[i / per] >> (i % per * bits)) & ((1 << bits) - 1);
    store_int(a.raw(), i, dt == DType::f4e2m1 ? DType::u8 : dt, v);
  }
  return a;
}

// External data: `location` (a path under the model's folder), `offset`
// and `length` (default: the rest of the file), as the spec's
// external_data entries say.
NDArray external_value(const onnx::TensorProto& t, DType dt, const std::vector<int64_t>& shape, const std::string& what, const std::string& base_dir) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  auto number = [&](const std::string& key, const std::string& v) {
    if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
      throw Error("onnx: " + what + ": external data " + key + " '" + v + "' is not a number");
    return static_cast<uint64_t>(std::stoull(v));
  };
  for (const auto& e : t.external_data()) {
    if (e.key() == "location") location = e.value();
    else if (e.key() == "offset") offset = number("offset", e.value());
    else if (e.key() == "length") length = number("length", e.value());
  }
  if (location.empty()) throw Error("onnx: " + what + ": external data without a location");
  std::filesystem::path rel(location);
  bool escapes = rel.is_absolute();
  for (const auto& part : rel) escapes |= part == "..";
  if (escapes) throw Error("onnx: " + what + ": external data location '" + location + "' is outside the model's folder");
  if (base_dir.empty()) throw Error("onnx: " + what + ": external data ('" + location + "') needs the model's folder: import the file, not its bytes");
  std::filesystem::path file = std::filesystem::path(base_dir) / rel;
  std::shared_ptr<const FileMapping> map = map_file(file, what);
  const uint64_t size = map->size;
  const int64_t numel = checked_numel(shape, dt);
  const uint64_t nbytes = packed_bits(dt) ? packed_bytes(numel, packed_bits(dt)) : static_cast<uint64_t>(numel) * static_cast<uint64_t>(dtype_size(dt));
  uint64_t want = length.value_or(nbytes);
  if (want != nbytes)
    throw Error("onnx: " + what + ": external data length " + std::to_string(want) + " for " + std::string(dtype_name(dt)) + shape_str(Shape(shape.begin(), shape.end())) + " (" +
                std::to_string(nbytes) + " bytes)");
  if (offset > size || size - offset < want)
    throw Error("onnx: " + what + ": external data runs past the end of '" + file.string() + "' (" + std::to_string(size) + " bytes, offset " +
                std::to_string(offset) + ", length " + std::to_string(want) + ")");
  if (want == 0) return NDArray(dt, shape);
  char* at = static_cast<char*>(map->data) + offset;
  if (packed_bits(dt)) return unpack(reinterpret_cast<const uint8_t*>(at), want, dt, shape, what);
  // Viewed in place when the elements are aligned, copied otherwise.
  if (offset % static_cast<uint64_t>(dtype_size(dt)) == 0) return NDArray::view(dt, shape, at, map);
  return NDArray::copy_of(dt, shape, at, want);
}

}  // namespace

NDArray tensor_value(const onnx::TensorProto& t, const std::string& where, const std::string& base_dir) {
  std::string what = where + " '" + t.name() + "'";
  DType dt = dtype_of_onnx(t.data_type(), what);
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  for (int64_t d : shape)
    if (d < 0) throw Error("onnx: " + what + ": negative dim " + std::to_string(d));
  if (t.data_location() == onnx::TensorProto::EXTERNAL) return external_value(t, dt, shape, what, base_dir);
  const size_t n = static_cast<size_t>(checked_numel(shape, dt));
  const std::string type = std::string(dtype_name(dt)) + shape_str(Shape(shape.begin(), shape.end()));
  if (packed_bits(dt)) {  // in raw_data, or a byte in each of int32_data
    if (t.has_raw_data()) return unpack(reinterpret_cast<const uint8_t*>(t.raw_data().data()), t.raw_data().size(), dt, shape, what);
    std::vector<uint8_t> bytes;
    for (int32_t b : t.int32_data()) bytes.push_back(static_cast<uint8_t>(b));
    return unpack(bytes.data(), bytes.size(), dt, shape, what);
  }
  if (t.has_raw_data()) {
    const size_t nbytes = n * dtype_size(dt);
    if (t.raw_data().size() != nbytes)
      throw Error("onnx: " + what + ": " + std::to_string(t.raw_data().size()) + " bytes of raw data for " + type);
    return NDArray::copy_of(dt, shape, t.raw_data().data(), nbytes);
  }
  // Typed fields: the count is checked before the array is allocated.
  const size_t got = dt == DType::f32                        ? static_cast<size_t>(t.float_data_size())
                     : dt == DType::f64                      ? static_cast<size_t>(t.double_data_size())
                     : dt == DType::i64                      ? static_cast<size_t>(t.int64_data_size())
                     : dt == DType::u32 || dt == DType::u64  ? static_cast<size_t>(t.uint64_data_size())
                                                             : static_cast<size_t>(t.int32_data_size());  // the rest: in int32_data
  if (got != n) throw Error("onnx: " + what + ": " + std::to_string(got) + " values for " + type);
  NDArray a(dt, shape);
  switch (dt) {
    case DType::f32: for (size_t i = 0; i < n; ++i) a.data<float>()[i] = t.float_data(static_cast<int>(i)); break;
    case DType::f64: for (size_t i = 0; i < n; ++i) a.data<double>()[i] = t.double_data(static_cast<int>(i)); break;
    case DType::i64: for (size_t i = 0; i < n; ++i) a.data<int64_t>()[i] = t.int64_data(static_cast<int>(i)); break;
    case DType::i32: for (size_t i = 0; i < n; ++i) a.data<int32_t>()[i] = t.int32_data(static_cast<int>(i)); break;
    case DType::boolean: for (size_t i = 0; i < n; ++i) a.data<uint8_t>()[i] = t.int32_data(static_cast<int>(i)) != 0; break;
    case DType::f8e4m3fn: case DType::f8e4m3fnuz: case DType::f8e5m2: case DType::f8e5m2fnuz: case DType::f8e8m0:  // bits
      for (size_t i = 0; i < n; ++i) a.data<uint8_t>()[i] = static_cast<uint8_t>(t.int32_data(static_cast<int>(i)));
      break;
    case DType::i8: case DType::u8: case DType::i16: case DType::u16:
      for (size_t i = 0; i < n; ++i) store_int(a.raw(), static_cast<int64_t>(i), dt, t.int32_data(static_cast<int>(i)));
      break;
    case DType::u32: case DType::u64:
      for (size_t i = 0; i < n; ++i) store_int(a.raw(), static_cast<int64_t>(i), dt, static_cast<int64_t>(t.uint64_data(static_cast<int>(i))));
      break;
    default:  // f16/bf16 as bits
      for (size_t i = 0; i < n; ++i) a.data<uint16_t>()[i] = static_cast<uint16_t>(t.int32_data(static_cast<int>(i)));
  }
  return a;
}

namespace {

Shape shape_of(const onnx::ValueInfoProto& v) {
  if (!v.type().has_tensor_type()) throw Unsupported("onnx: input '" + v.name() + "' is not a tensor (sequences, maps and optionals are not supported)");
  const auto& tt = v.type().tensor_type();
  if (!tt.has_shape()) throw Error("onnx: input '" + v.name() + "' has no shape (its rank is needed)");
  Shape s;
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) s.push_back(Dim(d.dim_value()));
    else if (d.has_dim_param() && !d.dim_param().empty()) s.push_back(Dim::symbol(d.dim_param()));
    else throw Error("onnx: input '" + v.name() + "' has a dim with neither a size nor a name");
  }
  return s;
}

// A model of an older opset is read as opset 13 when each of its ops has
// the same definition in both (no new version between them, as ONNX's own
// schema registry says); else the first op that changed is named.
void check_older_opset(const onnx::GraphProto& g, int64_t opset, const std::string& what) {
  auto changed = [&](const std::string& op) {
    const auto* then = ::onnx::OpSchemaRegistry::Schema(op, static_cast<int>(opset), "");
    const auto* at13 = ::onnx::OpSchemaRegistry::Schema(op, 13, "");
    return !then || !at13 || then->since_version() != at13->since_version();
  };
  for (const auto& n : g.node()) {
    if (!n.domain().empty() && n.domain() != "ai.onnx") continue;
    if (changed(n.op_type()))
      throw Unsupported("onnx: " + what + ": opset " + std::to_string(opset) + " is not supported (13 and later are; " + n.op_type() +
                        " is defined differently at opset " + std::to_string(opset) + " and 13)");
    for (const auto& a : n.attribute())
      if (a.has_g()) check_older_opset(a.g(), opset, what);
  }
}

// Small constants are kept known: shapes and axes are computed from them.
constexpr int64_t kKnownElements = 1 << 16;

// A node whose operands are all known is evaluated at import (shape
// arithmetic: Shape -> Gather -> Unsqueeze -> Concat -> Reshape): its
// converter runs again over constants in a graph of its own, which the
// interpreter computes.
void evaluate_known(Ctx& c, const Converter& conv, std::vector<Value>* results) {
  const onnx::NodeProto& n = *c.node;
  for (const auto& a : n.attribute())
    if (a.has_g() || a.graphs_size() > 0) return;  // subgraphs read values from outside the node
  for (int i = 0; i < n.input_size(); ++i)
    if (!n.input(i).empty() && !c.input(static_cast<size_t>(i)).known) return;
  bool wanted = false;
  for (const Value& r : *results) wanted |= !r.known;
  if (!wanted) return;
  Tracer t("known");
  Ctx k{t, {}, c.opset, c.node, c.base_dir};
  for (int i = 0; i < n.input_size(); ++i) {
    if (n.input(i).empty() || k.values.count(n.input(i))) continue;
    const NDArray& a = *c.input(static_cast<size_t>(i)).known;
    k.values.emplace(n.input(i), Value{t.constant(a), a});
  }
  std::vector<Value> r = conv(k);
  std::vector<Tensor> outs;
  for (const Value& v : r) outs.push_back(v.t);
  Graph g = t.finish(outs);
  for (ValueId o : g.outputs())
    if (auto e = numel_const(g.type(o).shape); !e || *e > kKnownElements) return;
  std::vector<NDArray> got = interpret(g, {});
  for (size_t i = 0; i < results->size() && i < got.size(); ++i)
    if (!(*results)[i].known) (*results)[i].known = std::move(got[i]);
}

}  // namespace

void convert_nodes(Ctx& c, const onnx::GraphProto& g) {
  for (const auto& n : g.node()) {
    c.node = &n;
    if (!n.domain().empty() && n.domain() != "ai.onnx") c.unsupported("the op " + n.op_type() + " of domain '" + n.domain() + "' is not supported");
    const Converter* conv = find_converter(n.op_type());
    if (!conv) c.unsupported("the op " + n.op_type() + " (domain ai.onnx, opset " + std::to_string(c.opset) + ") is not supported yet");
    std::vector<Value> results;
    try {
      if (auto sym = eval_symbolic(c)) {
        results = std::move(*sym);
      } else {
        results = (*conv)(c);
      }
      c.node = &n;  // a converter of subgraphs (If) converts other nodes on the way
      evaluate_known(c, *conv, &results);
    } catch (const UnsupportedOperand& e) {  // valid ONNX
      c.node = &n;
      c.unsupported(e.what());
    } catch (const ShapeError& e) {
      c.node = &n;
      c.fail(e.what());
    }
    for (int i = 0; i < n.output_size() && static_cast<size_t>(i) < results.size(); ++i)
      if (!n.output(i).empty()) c.values[n.output(i)] = std::move(results[static_cast<size_t>(i)]);
  }
}

OnnxModel import_bytes(std::span<const std::byte> bytes, const std::string& what, const ImportOptions& opts) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    throw Error("onnx: " + what + ": " + std::to_string(bytes.size()) + " bytes: models over 2 GB need external data");
  ExternalFiles files;
  onnx::ModelProto m;
  if (!m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) throw Error("onnx: " + what + ": not a valid ONNX model (protobuf parse failed)");
  if (!m.has_graph()) throw Error("onnx: " + what + ": the model has no graph");
  OnnxModel out;
  // Other domains (ai.onnx.ml, ...) may be imported; a node that uses one is
  // unsupported.
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") out.opset = o.version();
  if (out.opset == 0) throw Unsupported("onnx: " + what + ": the model uses only operator sets other than the default one (ai.onnx)");
  if (out.opset < 13) check_older_opset(m.graph(), out.opset, what);
  const onnx::GraphProto& g = m.graph();
  Tracer t(g.name().empty() ? "onnx" : g.name());
  Ctx c{t, {}, out.opset, nullptr, opts.base_dir};
  for (const auto& init : g.initializer()) {
    out.external_data |= init.data_location() == onnx::TensorProto::EXTERNAL;
    NDArray a = tensor_value(init, "initializer", opts.base_dir);
    Value v{t.param(init.name(), a.dtype(), Shape(a.shape().begin(), a.shape().end())), std::nullopt};
    if (a.numel() <= kKnownElements) v.known = a;
    out.params.emplace(init.name(), std::move(a));
    c.values.emplace(init.name(), std::move(v));
  }
  std::vector<std::pair<std::string, Type>> declared;  // the graph inputs left as inputs
  for (const auto& in : g.input()) {
    if (c.values.count(in.name())) continue;  // an initializer listed as an input too (older exporters)
    Shape s = shape_of(in);
    DType dt = dtype_of_onnx(in.type().tensor_type().elem_type(), "input '" + in.name() + "'");
    if (auto k = opts.known_inputs.find(in.name()); k != opts.known_inputs.end()) {
      const NDArray& a = k->second;
      if (a.dtype() != dt || a.shape().size() != s.size())
        throw Error("onnx: " + what + ": known input '" + in.name() + "' is " + a.type_str() + ", the graph's input is " + std::string(dtype_name(dt)) +
                    shape_str(s));
      c.values.emplace(in.name(), Value{t.constant(a), a});
      continue;
    }
    declared.push_back({in.name(), Type{dt, s}});
    c.values.emplace(in.name(), Value{t.input(in.name(), dt, s), std::nullopt});
  }
  try {
    convert_nodes(c, g);
  } catch (MustBeKnown& e) {
    e.inputs = std::move(declared);
    for (const auto& o : g.output()) e.outputs.push_back(o.name());
    throw;
  }
  c.node = nullptr;
  std::vector<Tensor> outs;
  for (const auto& o : g.output()) {
    auto it = c.values.find(o.name());
    if (it == c.values.end()) throw Error("onnx: " + what + ": output '" + o.name() + "' is not computed by the graph");
    outs.push_back(it->second.t);
    out.output_names.push_back(o.name());
  }
  out.graph = t.finish(outs);
  return out;
}

OnnxModel import_file(const std::string& path, const ImportOptions& opts) {
  ImportOptions o = opts;
  if (o.base_dir.empty()) o.base_dir = std::filesystem::path(path).parent_path().string();
  if (o.base_dir.empty()) o.base_dir = ".";
  auto t0 = std::chrono::steady_clock::now();
  // Parsed from a read-only mapping of the file: the protobuf copies the
  // initializers' bytes once, where reading the file into a buffer first
  // made a second copy of them (90 MB of fresh pages for MiniLM-L6).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("onnx: cannot open " + path + ": " + std::strerror(errno));
  struct stat sb;
  if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    ::close(fd);
    throw Error("onnx: cannot read " + path + ": not a regular file");
  }
  const size_t size = static_cast<size_t>(sb.st_size);
  void* data = size > 0 ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  ::close(fd);
  if (data == MAP_FAILED) throw Error("onnx: cannot read " + path + ": " + std::strerror(errno));
  std::unique_ptr<void, std::function<void(void*)>> mapping(data, [size](void* p) {
    if (p) ::munmap(p, size);
  });
  if (data) ::madvise(data, size, MADV_SEQUENTIAL);
  auto t1 = std::chrono::steady_clock::now();
  OnnxModel m = import_bytes(std::span(static_cast<const std::byte*>(data), size), path, o);
  if (log_enabled("compile"))
    std::fprintf(stderr, "[onnx] %s: read %.1f MB in %.0f ms, imported %zu nodes in %.0f ms\n", path.c_str(), static_cast<double>(size) / 1e6,
                 std::chrono::duration<double, std::milli>(t1 - t0).count(), m.graph.size(),
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count());
  return m;
}

}  // namespace tj::onnx_import
