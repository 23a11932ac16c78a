#include "compiler/model_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "compiler/program_cache.h"
#include "ir/extract.h"
#include "ir/text.h"
#include "support/files.h"
#include "support/identity.h"
#include "support/log.h"
#include "support/paths.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "tensorjit model cache 1";

void note(const std::string& what) {
  if (log_enabled("compile")) std::fprintf(stderr, "[compile] model cache: %s\n", what.c_str());
}

// The entry's path for the model file as it is now; empty when it cannot be
// keyed (unreadable file, unknown tensorjit identity).
fs::path entry_path(const std::string& path, const std::string& variant) {
  if (build_identity().empty()) return {};
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec);
  if (ec) return {};
  int fd = ::open(abs.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string id = file_identity(fd);
  ::close(fd);
  if (id.empty()) return {};
  std::string keyed = std::string(kFormat) + "\n" + build_identity() + "\n" + abs.string() + "\n" + id + (variant.empty() ? "" : "\n" + variant);
  return fs::path(cache_dir()) / "models" / (hex128(XXH3_128bits(keyed.data(), keyed.size())) + ".json");
}

// The graph with its params named w0, w1, ... in order: an ONNX
// initializer's name ("onnx::MatMul_907") need not be one IR text can spell,
// and a warm run reads no weight by name (its program holds them all).
Graph with_plain_param_names(const Graph& g) {
  int next = 0;
  return copy_graph(g, [&](Graph& s, ValueId v) {
    const Node& n = g.node(v);
    if (n.op == Op::input) return s.add_input(n.name, n.type);
    if (n.op == Op::param) return s.add_param("w" + std::to_string(next++), n.type);
    return s.copy_const(n);
  });
}

}  // namespace

std::optional<ModelEntry> load_model_entry(const std::string& path, const std::string& variant) {
  fs::path p = entry_path(path, variant);
  if (p.empty()) return std::nullopt;
  bool ok;
  std::string text = read_file(p, &ok);
  if (!ok) return std::nullopt;
  try {
    auto j = nlohmann::json::parse(text);
    if (j.at("format") != kFormat) return std::nullopt;
    ModelEntry e{parse_graph(j.at("graph").get<std::string>()), j.at("outputs").get<std::vector<std::string>>(),
                 j.at("program").get<std::string>()};
    if (e.output_names.size() != e.graph.outputs().size()) throw Error("its output names do not fit its graph");
    touch_files({p});  // used: last to be evicted
    return e;
  } catch (const std::exception& e) {  // a damaged entry: the model is imported again, and the entry rewritten
    note(p.filename().string() + " cannot be read (" + std::string(e.what()).substr(0, 200) + "): importing the model");
    return std::nullopt;
  }
}

void store_model_entry(const std::string& path, const Graph& graph, const std::vector<std::string>& output_names,
                       const std::string& program_key, const std::string& variant) {
  fs::path p = entry_path(path, variant);
  if (p.empty() || program_key.empty()) return;
  try {
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    std::string text = print_graph(with_plain_param_names(graph));
    parse_graph(text);  // an input named in a way the text cannot spell: not kept
    nlohmann::json j = {{"format", kFormat}, {"program", program_key}, {"outputs", output_names}, {"graph", text}};
    write_atomic(p, j.dump());
    evict_least_recent(p.parent_path(), cache_size_limit(note), {p}, note);
    note("stored " + p.filename().string() + " for " + path);
  } catch (const Error& e) {
    note(std::string("not stored: ") + e.what());
  }
}

}  // namespace tj
