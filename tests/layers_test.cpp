// The layers of src/ (cmake/layers.cmake): every #include of src/ and of
// include/tensorjit/ names its own layer or one below it, every folder of
// src/ is a layer, and every public header belongs to one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Layers {
  std::vector<std::string> order;                        // bottom first, as declared
  std::map<std::string, std::set<std::string>> below;     // layer -> every layer under it
  std::map<std::string, std::string> header_owner;        // "tensorjit/x.h" -> layer
};

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

// layers.txt: "name: dep dep | header header" a line, bottom first.
Layers read_layers(std::string* error) {
  Layers l;
  std::ifstream f(TJ_LAYERS);
  if (!f) *error = std::string("cannot read ") + TJ_LAYERS;
  for (std::string line; std::getline(f, line);) {
    const size_t colon = line.find(':'), bar = line.find('|');
    if (colon == std::string::npos || bar == std::string::npos) continue;
    const std::string name = line.substr(0, colon);
    std::set<std::string> below;
    for (const std::string& d : words(line.substr(colon + 1, bar - colon - 1))) {
      if (!l.below.count(d)) *error += name + " names " + d + ", which is not a layer declared before it\n";
      below.insert(d);
      below.insert(l.below[d].begin(), l.below[d].end());
    }
    for (const std::string& h : words(line.substr(bar + 1))) {
      auto [it, fresh] = l.header_owner.emplace("tensorjit/" + h, name);
      if (!fresh) *error += "tensorjit/" + h + " is declared by both " + it->second + " and " + name + "\n";
    }
    l.order.push_back(name);
    l.below[name] = below;
  }
  return l;
}

std::string text(const std::set<std::string>& s) {
  std::string r;
  for (const auto& x : s) r += (r.empty() ? "" : ", ") + x;
  return r.empty() ? "nothing" : r;
}

const fs::path kRoot = TJ_SOURCE_ROOT;

TEST(Layers, DeclaredInOrderAndCoverTheTree) {
  std::string error;
  Layers l = read_layers(&error);
  ASSERT_FALSE(l.order.empty()) << error;
  for (const auto& e : fs::directory_iterator(kRoot / "src"))
    if (e.is_directory() && !l.below.count(e.path().filename().string()))
      error += "src/" + e.path().filename().string() + " is in no layer (cmake/layers.cmake)\n";
  for (const auto& e : fs::directory_iterator(kRoot / "include" / "tensorjit"))
    if (!l.header_owner.count("tensorjit/" + e.path().filename().string()))
      error += "include/tensorjit/" + e.path().filename().string() + " belongs to no layer (cmake/layers.cmake HEADERS)\n";
  EXPECT_EQ(error, "");
}

TEST(Layers, EveryIncludeNamesItsLayerOrOneBelow) {
  std::string error;
  Layers l = read_layers(&error);
  ASSERT_FALSE(l.order.empty()) << error;
  const std::regex include_line(R"(^\s*#\s*include\s*"([^"]+)\")");
  // The layer a quoted include names: a public header's owner, or the
  // first folder of a path under src/ (nothing for a file of neither).
  auto layer_of = [&](const std::string& inc) -> std::string {
    if (auto it = l.header_owner.find(inc); it != l.header_owner.end()) return it->second;
    const std::string top = inc.substr(0, inc.find('/'));
    return inc.find('/') != std::string::npos && l.below.count(top) ? top : "";
  };
  auto check = [&](const fs::path& file, const std::string& layer) {
    std::ifstream f(file);
    int n = 0;
    for (std::string line; std::getline(f, line);) {
      ++n;
      std::smatch m;
      if (!std::regex_search(line, m, include_line)) continue;
      const std::string to = layer_of(m[1].str());
      if (to.empty() || to == layer || l.below[layer].count(to)) continue;
      error += fs::relative(file, kRoot).string() + ":" + std::to_string(n) + " includes " + m[1].str() + " (" + to + "), above " +
               layer + ", which may include " + text(l.below[layer]) + "\n";
    }
  };
  int files = 0;
  for (const std::string& layer : l.order)
    for (const auto& e : fs::recursive_directory_iterator(kRoot / "src" / layer))
      if (e.is_regular_file()) check(e.path(), layer), ++files;
  for (const auto& [header, layer] : l.header_owner) check(kRoot / "include" / header, layer), ++files;
  EXPECT_GT(files, 100);
  EXPECT_EQ(error, "");
}

}  // namespace
