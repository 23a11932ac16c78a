#include "bench/args.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "frontend/onnx/import.h"
#include "ir/text.h"
#include "tensorjit/error.h"

namespace tj::bench {

std::string read_source(const std::string& path) {
  if (path == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Graph load_graph(const std::string& path) {
  if (path.ends_with(".onnx")) return onnx_import::import_file(path).graph;
  std::string text = read_source(path);
  try {
    return parse_graph(text);
  } catch (const ParseError& e) {
    throw Error((path == "-" ? std::string("<stdin>") : path) + ":" + e.what());
  }
}

DType dtype_arg(const std::string& s) {
  auto d = parse_dtype(s);
  if (!d) throw Error("unknown dtype '" + s + "'");
  return *d;
}

Dim dim_arg(const std::string& text, const char* option) {
  try {
    return Dim::parse(text);
  } catch (const Error& e) {
    throw Error(std::string(option) + " '" + text + "': " + e.what());
  }
}

std::vector<std::string> split_on(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(sep, start);
    parts.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

std::pair<std::string, std::string> split_eq(const std::string& s, const char* what) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) throw Error(std::string(what) + " expects NAME=VALUE, got '" + s + "'");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

double parse_number(const std::string& s, const std::string& what) {
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  throw Error(what + ": '" + s + "' is not a number");
}

int64_t int_arg(const std::string& s, const std::string& what, int64_t lo, int64_t hi) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  bool whole = ec == std::errc() && end == s.data() + s.size() && !s.empty();
  if (!whole || v < lo || v > hi) {
    std::string range = lo == 0 ? "a non-negative integer" : "an integer";
    throw Error(what + ": '" + s + "' is not " + range + " <= " + std::to_string(hi) +
                (lo == 0 ? "" : " and >= " + std::to_string(lo)));
  }
  return v;
}

int64_t size_arg(const std::string& s, const std::string& what) { return int_arg(s, what, 0, kMaxSize); }

void set_element(NDArray& a, int64_t k, const std::string& text, const std::string& what) {
  DType t = a.dtype();
  const std::string type(dtype_name(t));
  if (t == DType::boolean) {
    bool v;
    if (text == "0" || text == "false") v = false;
    else if (text == "1" || text == "true") v = true;
    else throw Error(what + ": '" + text + "' is not a bool (0, 1, false or true)");
    a.data<uint8_t>()[k] = v;
  } else if (t == DType::u64) {
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty())
      throw Error(what + ": '" + text + "' is not a u64 (0 to 18446744073709551615)");
    a.data<uint64_t>()[k] = v;
  } else if (t == DType::i64) {
    a.data<int64_t>()[k] = int_arg(text, what + " (i64)", INT64_MIN, INT64_MAX);
  } else if (is_int(t)) {
    store_int(a.raw(), k, t, int_arg(text, what + " (" + type + ")", static_cast<int64_t>(int_min(t)), static_cast<int64_t>(int_max(t))));
  } else {
    double v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty())
      throw Error(what + ": '" + text + "' is not a " + type + " number (or nan, inf, -inf)");
    if (std::isfinite(v) && !std::isfinite(round_to_dtype(v, t))) throw Error(what + ": " + text + " is out of range for " + type);
    a.set(k, v);
  }
}

void make_folder(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("cannot create folder '" + dir + "': " + ec.message());
  if (!std::filesystem::is_directory(dir, ec)) throw Error("cannot create folder '" + dir + "': it exists and is not a folder");
}

}  // namespace tj::bench
