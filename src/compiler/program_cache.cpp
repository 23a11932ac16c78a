#include "compiler/program_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <sstream>
#include <xxhash.h>

#include "ir/extract.h"
#include "ir/rewriter.h"
#include "ir/text.h"
#include "passes/pipeline.h"
#include "runtime/thread_pool.h"
#include "support/files.h"
#include "support/identity.h"
#include "support/log.h"
#include "support/paths.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "tensorjit program cache 2";
constexpr const char* kPrefix = "tj.const.";


int64_t align64(int64_t n) { return (n + 63) / 64 * 64; }

fs::path entry_dir() { return fs::path(cache_dir()) / "programs"; }


void note(const std::string& what) {
  if (log_enabled("compile")) std::fprintf(stderr, "[compile] program cache: %s\n", what.c_str());
}

// The bytes of each tj.const.N param, in the order of g.params(), at 64-byte
// aligned offsets: the entry's data file.
struct Layout {
  std::vector<std::pair<std::string, int64_t>> offsets;  // name -> offset
  int64_t bytes = 0;
};
Layout layout_of(const Graph& g) {
  Layout l;
  for (ValueId p : g.params()) {
    const Node& n = g.node(p);
    if (n.name.rfind(kPrefix, 0) != 0) continue;
    auto count = numel_const(n.type.shape);
    if (!count) throw Error("program cache: constant " + n.name + " has no static shape");
    l.offsets.emplace_back(n.name, l.bytes);
    l.bytes += align64(*count * static_cast<int64_t>(dtype_size(n.type.dtype)));
  }
  return l;
}

PreparedProgram with_storage(Graph g, std::shared_ptr<const void> storage) {
  PreparedProgram p{std::move(g), std::move(storage), {}};
  for (const auto& [name, off] : layout_of(p.graph).offsets) p.constants[name] = static_cast<const char*>(p.storage.get()) + off;
  return p;
}

// The sidecar: the format, the text's hash and size, the data's hash and
// size. The data file is named by its hash: programs whose prepared
// constants are the same (one model at several shapes) share it.
std::string sidecar_text(const std::string& text, const std::string& data_hash, int64_t bytes) {
  return std::string(kFormat) + "\n" + hex128(XXH3_128bits(text.data(), text.size())) + " " + std::to_string(text.size()) + "\n" +
         data_hash + " " + std::to_string(bytes) + "\n";
}
// XXH3-128 of the XXH3-128s of its 4 MiB chunks, the chunks hashed in
// parallel on the pool: weights are hundreds of MB, and a warm start
// hashes them twice (the key, the check of the data file).
constexpr size_t kChunk = size_t{4} << 20;
XXH128_hash_t content_hash(const void* data, size_t bytes) {
  size_t chunks = (bytes + kChunk - 1) / kChunk;
  if (chunks <= 1) return XXH3_128bits(data, bytes);
  std::vector<XXH128_hash_t> h(chunks);
  const char* p = static_cast<const char*>(data);
  ThreadPool::global().run_parts(static_cast<int64_t>(chunks), [&](int64_t i, int64_t, int) {
    size_t off = static_cast<size_t>(i) * kChunk;
    h[static_cast<size_t>(i)] = XXH3_128bits(p + off, std::min(kChunk, bytes - off));
  });
  return XXH3_128bits(h.data(), h.size() * sizeof(XXH128_hash_t));
}
std::string data_hash(const void* data, int64_t bytes) { return hex128(content_hash(data, static_cast<size_t>(bytes))); }

// A data file that was hashed once need not be hashed on every hit (at
// memory speed, 15 ms per 177 MB on this project's Xeon): the file's
// identity as fstat saw it after the hash matched (support/files.h) is kept
// beside it, in <hash>.seen, and a hit whose file still has that identity
// trusts it.
fs::path seen_path(const fs::path& dir, const std::string& hash) { return dir / (hash + ".seen"); }
// Records that the open data file `fd` holds what its name says. A record
// that cannot be written only costs the next hit a hash.
void record_seen(const fs::path& dir, const std::string& hash, int fd) {
  std::string id = file_identity(fd);
  if (id.empty()) return;
  try {
    write_atomic(seen_path(dir, hash), id);
  } catch (const Error&) {
  }
}

}  // namespace

std::string program_key(const Graph& traced, const Bindings& params, const CompileOptions& o) {
  if (build_identity().empty()) return "";
  XXH3_state_t* st = XXH3_createState();
  if (!st) throw Error("out of memory");
  XXH3_128bits_reset(st);
  auto add = [&](const std::string& s) { XXH3_128bits_update(st, s.data(), s.size() + 1); };  // with its NUL: unambiguous
  add(kFormat);
  add(build_identity());
  add(print_graph(traced));
  std::string opts = "passes";
  for (const auto& p : o.passes.empty() ? default_pipeline(true) : o.passes) opts += " " + p;
  opts += "\nfusion " + std::to_string(o.fusion.epilogue) + std::to_string(o.fusion.pointwise) + std::to_string(o.fusion.rowwise) +
          std::to_string(o.fusion.horizontal) + "\nreorder " + std::to_string(o.reorder) + "\nweights " +
          std::string(dtype_name(o.weights)) + "\nhint";
  for (const auto& [k, v] : o.size_hint) opts += " " + k + "=" + std::to_string(v);
  for (const auto& [k, v] : o.fusion.size_hint) opts += " f" + k + "=" + std::to_string(v);
  add(opts);
  for (ValueId p : traced.params()) {
    const std::string& name = traced.node(p).name;
    auto it = params.find(name);
    if (it == params.end()) continue;  // compile() reports it
    const NDArray& a = it->second;
    add(name + " " + a.type_str());
    XXH128_hash_t h = content_hash(a.raw(), a.nbytes());
    XXH3_128bits_update(st, &h, sizeof h);
  }
  std::string key = hex128(XXH3_128bits_digest(st));
  XXH3_freeState(st);
  return key;
}

std::optional<PreparedProgram> load_program(const std::string& key) {
  fs::path dir = entry_dir();
  bool ok_text, ok_side;
  std::string side = read_file(dir / (key + ".ok"), &ok_side);
  if (!ok_side) return std::nullopt;
  std::string text = read_file(dir / (key + ".tj"), &ok_text);
  if (!ok_text) return std::nullopt;
  std::istringstream lines(side);
  std::string format, line2, named;
  std::getline(lines, format);
  std::getline(lines, line2);
  lines >> named;  // the data file's hash: its name
  if (format != kFormat || named.size() != 32 || named.find_first_not_of("0123456789abcdef") != std::string::npos) {
    note(key + " has a malformed sidecar: rebuilding it");
    return std::nullopt;
  }
  int fd = ::open((dir / (named + ".bin")).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat sb;
  if (::fstat(fd, &sb) != 0) {
    ::close(fd);
    return std::nullopt;
  }
  int64_t bytes = sb.st_size;
  // Closed on every path out (the mapping keeps its own reference).
  std::unique_ptr<int, void (*)(int*)> open_fd(&fd, [](int* f) { ::close(*f); });
  bool ok_seen;
  std::string seen = read_file(seen_path(dir, named), &ok_seen);
  bool trusted = ok_seen && !seen.empty() && seen == file_identity(fd);
  std::shared_ptr<const void> storage;
  if (bytes > 0) {
    void* m = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (m == MAP_FAILED) return std::nullopt;
    storage = std::shared_ptr<const void>(m, [bytes](const void* p) { ::munmap(const_cast<void*>(p), static_cast<size_t>(bytes)); });
  } else {
    storage = std::shared_ptr<const void>(std::malloc(1), [](const void* p) { std::free(const_cast<void*>(p)); });
  }
  std::string got = trusted ? named : data_hash(storage.get(), bytes);
  if (side != sidecar_text(text, got, bytes)) {
    note(key + " is incomplete or corrupt: rebuilding it");
    // A data file whose bytes are not its name's hash is corrupt for every
    // program that uses it.
    std::error_code ec;
    if (got != named) fs::remove(dir / (named + ".bin"), ec);
    return std::nullopt;
  }
  try {
    Graph g = parse_graph(text);
    if (layout_of(g).bytes != bytes) throw Error("its data file does not fit its graph");
    touch_files({dir / (key + ".ok"), dir / (key + ".tj"), dir / (named + ".bin")});  // used: last to be evicted
    record_seen(dir, named, fd);  // its identity after the touch (a hash now, or a trusted one before it)
    return with_storage(std::move(g), std::move(storage));
  } catch (const Error& e) {
    note(key + " cannot be read (" + std::string(e.what()).substr(0, 200) + "): rebuilding it");
    return std::nullopt;
  }
}

namespace {

// A small table of integers (a gather's constant indices: Resize's taps)
// stays in the text, where the emitter sees its values: indices inside
// their axis are read without the bounds check, whose store to tj_status
// kept the loop scalar. Up to 4096 of them, each exact in a double.
bool inline_indices(const Node& n) {
  const ConstData& d = n.const_data();
  if (!is_int(n.type.dtype) || d->size() > 4096) return false;
  for (size_t i = 0; i < d->size(); ++i)
    if (const int64_t v = d->int_at(i); v > (int64_t{1} << 53) || v < -(int64_t{1} << 53)) return false;
  return true;
}

}  // namespace

PreparedProgram store_program(const std::string& key, const Graph& optimized) {
  // Large constants become params: the graph's text stays small.
  std::unordered_map<std::string, ValueId> constant_of;
  int next = 0;
  auto users = users_of(optimized);  // params that freezing left unused are dropped
  Graph ext = copy_graph(optimized, [&](Graph& s, ValueId v) -> ValueId {
    const Node& n = optimized.node(v);
    if (n.op == Op::input) return s.add_input(n.name, n.type);
    if (n.op == Op::param) return users[static_cast<size_t>(v)].empty() ? -1 : s.add_param(n.name, n.type);
    if (n.const_data()->size() <= 1 || inline_indices(n)) return s.copy_const(n);
    std::string name;
    do name = kPrefix + std::to_string(next++);
    while (optimized.find(name) >= 0);
    constant_of[name] = v;
    return s.add_param(name, n.type);
  });
  // Read back from its text, as a warm start will.
  std::string text = print_graph(ext);
  Graph g = parse_graph(text);
  Layout l = layout_of(g);
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(l.bytes, 64));
  fs::path dir = entry_dir();
  std::error_code ec;
  fs::create_directories(dir, ec);
  // The constants go straight from where they are into the data file (a
  // temporary, renamed into place once hashed), and the program reads them
  // from its pages, mapped, as a warm start does: one copy of each byte.
  // A heap block written out after took two, and zeroed pages for the
  // block (vgg11: 637 MB, 1.7-2.8 s for the store). Where the folder cannot
  // take the file (no room: a write fails, never a page of a mapping), a
  // heap block.
  // Each large constant's bytes and its offset in the data.
  auto each_constant = [&](const auto& f) {
    for (const auto& [name, off] : l.offsets) f(*optimized.node(constant_of.at(name)).const_data(), off);  // every value (a splat stays in the text)
  };
  const fs::path tmp = temporary_beside(dir / (key + ".bin"));
  void* block = nullptr;
  std::shared_ptr<const void> storage;
  if (int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644); fd >= 0) {
    bool ok = ::ftruncate(fd, static_cast<off_t>(l.bytes)) == 0;  // the padding: holes, read as zeros
    each_constant([&](const ConstValues& d, int64_t off) {
      const char* src = static_cast<const char*>(d.raw());
      for (size_t done = 0; ok && done < d.nbytes();) {
        ssize_t w = ::pwrite(fd, src + done, d.nbytes() - done, static_cast<off_t>(off + static_cast<int64_t>(done)));
        if (w <= 0) ok = false;
        else done += static_cast<size_t>(w);
      }
    });
    if (ok && l.bytes > 0) {
      void* m = ::mmap(nullptr, static_cast<size_t>(l.bytes), PROT_READ, MAP_SHARED, fd, 0);
      if (m != MAP_FAILED) {
        block = m;
        const size_t n = static_cast<size_t>(l.bytes);
        storage = std::shared_ptr<const void>(m, [n](const void* q) { ::munmap(const_cast<void*>(q), n); });
      }
    }
    ::close(fd);
    if (!block) fs::remove(tmp, ec);
  }
  const bool mapped = block != nullptr;
  if (!mapped) {
    block = std::aligned_alloc(64, bytes);
    if (!block) throw Error("out of memory preparing " + std::to_string(l.bytes) + " bytes of constants");
    storage = std::shared_ptr<const void>(block, [](const void* q) { std::free(const_cast<void*>(q)); });
    std::memset(block, 0, bytes);  // the padding
    each_constant([&](const ConstValues& d, int64_t off) { std::memcpy(static_cast<char*>(block) + off, d.raw(), d.nbytes()); });
  }
  try {
    std::string h = data_hash(block, l.bytes);
    write_atomic(dir / (key + ".tj"), text);
    fs::path bin = dir / (h + ".bin");
    bool wrote = fs::file_size(bin, ec) != static_cast<uintmax_t>(l.bytes);
    if (wrote && mapped) {
      fs::rename(tmp, bin, ec);
      if (ec) throw Error("cannot write " + bin.string() + ": " + ec.message());
    } else if (wrote) {
      write_atomic(bin, block, static_cast<size_t>(l.bytes));
    }
    if (mapped && !wrote) fs::remove(tmp, ec);  // the data file was there already: this copy goes (its mapping stays)
    write_atomic(dir / (key + ".ok"), sidecar_text(text, h, l.bytes));
    note("stored " + key + " (" + std::to_string(l.offsets.size()) + " constants, " + std::to_string(l.bytes) + " bytes)");
    touch_files({bin});  // shared with an earlier program: used now
    if (int fd = wrote ? ::open(bin.c_str(), O_RDONLY | O_CLOEXEC) : -1; fd >= 0) {  // its bytes are the ones just hashed
      record_seen(dir, h, fd);
      ::close(fd);
    }
    // The folder's least recently used files go first (an entry that loses
    // one is a miss, rebuilt like a corrupt one), never this entry's.
    evict_least_recent(dir, cache_size_limit(note), {dir / (key + ".tj"), bin, dir / (key + ".ok"), seen_path(dir, h)}, note);
  } catch (const Error& e) {
    if (mapped) fs::remove(tmp, ec);
    note(std::string("not stored: ") + e.what());
  }
  return with_storage(std::move(g), std::move(storage));
}

}  // namespace tj
