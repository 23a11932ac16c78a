// The op table against the names users call it by (issue 31). Each op a
// user can call has
// - a tracer function in include/tensorjit/tensor.h, named as the op (or
//   as kCpp spells it), taking the op's operands as tensors, and defined in
//   src/frontend/tracer.cpp, where it emits the op;
// - a Python function of the tensorjit package (or a tensorjit.Tensor
//   method), named as the op (or as kPython spells it: numpy's names), bound
//   in python/src/ with the same operands, that calls that tracer function;
// - a line of docs/ir.md's op table (every op has one, internal ones too).
// The ops users do not call are in kInternal, with the reason. An op added
// to the table fails here until it is exposed in all three, or listed.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ir/op.h"

namespace tj {
namespace {

namespace fs = std::filesystem;
const fs::path kRoot = TJ_SOURCE_ROOT;

// The ops no user calls by name, and how they come about instead. (kv_write
// and the control flow, while_loop and cond, are called: tj::kv_write,
// tj::while_loop, tj::cond and their Python functions.)
const std::map<std::string, std::string> kInternal = {
    {"input", "a traced function's inputs: Tracer::input (Python: the jit function's arguments)"},
    {"param", "weights: Tracer::param (Python: the arrays of a weights argument)"},
    {"const", "numbers and arrays met while tracing: Tracer::constant, Tracer::scalar (Python: asarray, and numbers as operands)"},
    {"result", "a control-flow op's further results: tj::while_loop and tj::cond return them all"},
    {"attn_lse", "flash_attn's backward, which its derivative rule emits"},
    {"attn_dq", "flash_attn's backward, which its derivative rule emits"},
    {"attn_dkv", "flash_attn's backward, which its derivative rule emits"},
    {"conv", "called as the layer tj::conv (tensorjit/nn.h, src/frontend/nn/window.cpp; Python: tensorjit's nn conv, python/src/nn.cpp), "
             "which checks and normalizes its options (per-dim lists, a bias of another shape) before emitting the op"},
    {"max_pool", "made by the match_pools pass from max pooling's window form, which the layer tj::max_pool (tensorjit/nn.h; Python: "
                 "tensorjit's nn max_pool) builds, after differentiation (the row has no derivative rule)"},
    {"sum_pool", "made by the match_pools pass from the sum in average pooling's window form, which the layer tj::avg_pool "
                 "(tensorjit/nn.h; Python: tensorjit's nn avg_pool) builds, after differentiation (no derivative rule)"},
};

// Tracer functions not named as their op.
const std::map<std::string, std::string> kCpp = {
    {"add", "operator+"}, {"sub", "operator-"}, {"mul", "operator*"}, {"div", "operator/"},
    {"max", "maximum"},   {"min", "minimum"},
    {"and", "logical_and"}, {"or", "logical_or"}, {"not", "logical_not"},
};

// Python functions not named as their op (numpy's names, where numpy has
// the function); "Tensor.x" is a method of tensorjit.Tensor.
const std::map<std::string, std::string> kPython = {
    {"neg", "negative"}, {"recip", "reciprocal"}, {"cast", "Tensor.astype"},
    {"atan2", "arctan2"}, {"shift_left", "left_shift"}, {"shift_right", "right_shift"},
    {"sub", "subtract"}, {"mul", "multiply"}, {"div", "divide"}, {"max", "maximum"}, {"min", "minimum"}, {"pow", "power"},
    {"eq", "equal"}, {"ne", "not_equal"}, {"lt", "less"}, {"le", "less_equal"}, {"gt", "greater"}, {"ge", "greater_equal"},
    {"and", "logical_and"}, {"or", "logical_or"}, {"not", "logical_not"},
    {"sum", "Tensor.sum"}, {"amax", "Tensor.max"}, {"mean", "Tensor.mean"}, {"prod", "Tensor.prod"},
    {"reshape", "Tensor.reshape"}, {"permute", "Tensor.transpose"}, {"expand", "broadcast_to"}, {"slice", "slice_axis"},
    {"unsqueeze", "expand_dims"}, {"concat", "concatenate"}, {"gather", "take"}, {"iota", "arange"},
    {"flash_attn", "flash_attention"},
};

std::string read(const fs::path& p) {
  std::ifstream f(p);
  if (!f) ADD_FAILURE() << "cannot read " << p;
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// C++ without its comments (string and character literals kept).
std::string strip_comments(const std::string& s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '"' || s[i] == '\'') {
      const char q = s[i];
      r += s[i];
      for (++i; i < s.size() && s[i] != q; ++i) {
        if (s[i] == '\\') r += s[i++];
        r += s[i];
      }
      if (i < s.size()) r += s[i];
    } else if (s.compare(i, 2, "//") == 0) {
      i = std::min(s.find('\n', i), s.size()) - 1;
    } else if (s.compare(i, 2, "/*") == 0) {
      i = std::min(s.find("*/", i), s.size()) + 1;
    } else {
      r += s[i];
    }
  }
  return r;
}

// The position past the bracket that closes the one at `open`, skipping literals.
size_t closing(const std::string& s, size_t open) {
  const char o = s[open], c = o == '(' ? ')' : o == '{' ? '}' : ']';
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '"' || s[i] == '\'') {
      for (const char q = s[i++]; i < s.size() && s[i] != q; ++i)
        if (s[i] == '\\') ++i;
    } else if (s[i] == o) {
      ++depth;
    } else if (s[i] == c && --depth == 0) {
      return i + 1;
    }
  }
  return s.size();
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\n"), e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// A parameter list's types, without names and defaults, spaces collapsed.
std::vector<std::string> param_types(const std::string& list) {
  std::vector<std::string> parts;
  int depth = 0;
  std::string cur;
  for (char ch : list) {
    if (ch == '(' || ch == '<' || ch == '{' || ch == '[') ++depth;
    if (ch == ')' || ch == '>' || ch == '}' || ch == ']') --depth;
    if (ch == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!trim(cur).empty()) parts.push_back(cur);
  std::vector<std::string> types;
  for (std::string p : parts) {
    if (size_t eq = p.find('='); eq != std::string::npos) p = p.substr(0, eq);
    p = std::regex_replace(trim(p), std::regex(R"(\s+)"), " ");
    std::smatch m;
    if (std::regex_match(p, m, std::regex(R"((.*[&*>\s])\s*\w+)"))) p = trim(m[1].str());
    types.push_back(std::regex_replace(p, std::regex(R"(\s+([&*]))"), "$1"));
  }
  return types;
}

// How many operands a function takes: lo to hi tensors, and then a list of
// them if `list`.
struct Arity {
  int lo = 0, hi = 0;
  bool list = false;
  std::string str() const {
    std::string n = lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi);
    return n + (list ? " and a list of" : "") + (lo == 1 && hi == 1 && !list ? " tensor operand" : " tensor operands");
  }
};

Arity arity(const std::vector<std::string>& types, const std::set<std::string>& tensor, const std::set<std::string>& optional,
            const std::set<std::string>& list) {
  Arity a;
  for (const std::string& t : types) {
    if (tensor.count(t)) ++a.lo, ++a.hi;
    if (optional.count(t)) ++a.hi;
    if (list.count(t)) a.list = true;
  }
  return a;
}

// Whether a function of this arity can emit the op with each operand count it takes.
bool fits(const Arity& a, const OpDef& d) {
  if (a.list) return d.max_inputs == -1 && a.lo <= d.min_inputs;
  return a.lo >= d.min_inputs && (d.max_inputs == -1 || a.hi <= d.max_inputs);
}

std::string arity_of(const OpDef& d) {
  if (d.max_inputs == -1) return std::to_string(d.min_inputs) + " or more";
  if (d.min_inputs == d.max_inputs) return std::to_string(d.min_inputs);
  return std::to_string(d.min_inputs) + " to " + std::to_string(d.max_inputs);
}

// A C++ function returning tensors, declared or defined in a file.
struct CppFunction {
  std::string name;
  Arity arity;
  std::string body;  // empty for a declaration
  int depth = 0;     // of braces where it stands (1: namespace tj)
};

std::vector<CppFunction> cpp_functions(const std::string& file) {
  const std::string s = strip_comments(file);
  std::vector<int> depth(s.size() + 1, 0);
  for (size_t i = 0, d = 0; i < s.size(); ++i) {
    if (s[i] == '"' || s[i] == '\'') {
      for (const char q = s[i++]; i < s.size() && s[i] != q; ++i)
        if (s[i] == '\\') ++i;
      if (i >= s.size()) break;
    }
    if (s[i] == '{') ++d;
    if (s[i] == '}') --d;
    depth[i + 1] = static_cast<int>(d);
  }
  std::vector<CppFunction> r;
  const std::regex head(R"((^|\n)[ \t]*(?:inline[ \t]+)?(?:Tensor|std::vector<Tensor>)[ \t]+(operator[^\s(]+|\w+)[ \t]*\()");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), head); it != std::sregex_iterator(); ++it) {
    const size_t open = static_cast<size_t>(it->position() + it->length() - 1), close = closing(s, open);
    CppFunction f;
    f.name = (*it)[2].str();
    f.depth = depth[open];
    f.arity = arity(param_types(s.substr(open + 1, close - open - 2)), {"const Tensor&", "Tensor"}, {},
                    {"const std::vector<Tensor>&", "std::vector<Tensor>"});
    const size_t next = s.find_first_of("{;", close);
    if (next != std::string::npos && s[next] == '{') f.body = s.substr(next, closing(s, next) - next);
    r.push_back(f);
  }
  return r;
}

// A Python function or method bound in python/src/.
struct PyBinding {
  std::string name;  // "exp", or "Tensor.astype" for a method
  Arity arity;
  std::string body;  // what it calls
};

const std::set<std::string> kPyTensor = {"const Proxy&", "Proxy", "const Operand&", "Operand"};
const std::set<std::string> kPyOptional = {"std::optional<Proxy>", "const std::optional<Proxy>&", "const Opt&", "Opt"};
const std::set<std::string> kPyList = {"const std::vector<Proxy>&", "std::vector<Proxy>"};

// m.def("name", [](...) {...}) and TJ_UNARY/TJ_BINARY (python/src/ops.cpp)
// in every file; in proxy.cpp, where tensorjit.Tensor is bound, its
// methods: .def("name", [](const Proxy& self, ...) {...}) or binop(...).
std::vector<PyBinding> py_bindings() {
  const std::regex unary(R"(TJ_UNARY\((\w+)\))"), binary(R"(TJ_BINARY\((\w+),)"), def(R"re((\bm)?\.def\("(\w+)",\s*)re");
  std::vector<PyBinding> r;
  for (const auto& e : fs::directory_iterator(kRoot / "python" / "src")) {
    if (e.path().extension() != ".cpp") continue;
    const std::string s = strip_comments(read(e.path()));
    const bool methods = e.path().filename() == "proxy.cpp";
    for (auto it = std::sregex_iterator(s.begin(), s.end(), unary); it != std::sregex_iterator(); ++it)
      if ((*it)[1] != "name") r.push_back({(*it)[1].str(), {1, 1, false}, (*it)[1].str() + "(x)"});
    for (auto it = std::sregex_iterator(s.begin(), s.end(), binary); it != std::sregex_iterator(); ++it) {
      if ((*it)[1] == "name") continue;
      const size_t open = static_cast<size_t>(it->position()) + 9;
      r.push_back({(*it)[1].str(), {2, 2, false}, s.substr(open, closing(s, open) - open)});
    }
    for (auto it = std::sregex_iterator(s.begin(), s.end(), def); it != std::sregex_iterator(); ++it) {
      const bool module_fn = (*it)[1].matched;
      if (!module_fn && !methods) continue;
      const std::string name = module_fn ? (*it)[2].str() : "Tensor." + (*it)[2].str();
      size_t at = static_cast<size_t>(it->position() + it->length());
      if (s.compare(at, 6, "binop(") == 0 || s.compare(at, 7, "rbinop(") == 0) {
        const size_t open = s.find('(', at);
        r.push_back({name, {2, 2, false}, s.substr(open, closing(s, open) - open)});
        continue;
      }
      if (s[at] != '[') continue;  // not a lambda
      const size_t open = closing(s, at);
      if (s[open] != '(') continue;
      const size_t close = closing(s, open);
      const size_t brace = s.find('{', close);
      r.push_back({name, arity(param_types(s.substr(open + 1, close - open - 2)), kPyTensor, kPyOptional, kPyList),
                   s.substr(brace, closing(s, brace) - brace)});
    }
  }
  return r;
}

// The names public in the tensorjit package: what python/tensorjit/__init__.py
// imports from _core, and the functions it defines.
std::set<std::string> py_public() {
  const std::string s = read(kRoot / "python" / "tensorjit" / "__init__.py");
  std::set<std::string> r;
  const size_t b = s.find("from ._core import ("), e = s.find(')', b);
  const std::string list = b == std::string::npos ? "" : s.substr(b, e - b);
  const std::regex word(R"(\w+)"), def(R"(\ndef (\w+)\()");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), word); it != std::sregex_iterator(); ++it) r.insert(it->str());
  for (auto it = std::sregex_iterator(s.begin(), s.end(), def); it != std::sregex_iterator(); ++it) r.insert((*it)[1].str());
  return r;
}

// The Op enum's spellings, in order (src/ir/op.h).
std::vector<std::string> enum_names() {
  const std::string s = strip_comments(read(kRoot / "src" / "ir" / "op.h"));
  const size_t b = s.find("enum class Op : uint8_t {"), e = s.find("kNumOps", b);
  std::vector<std::string> r;
  if (b == std::string::npos || e == std::string::npos) return r;
  const std::string body = s.substr(s.find('{', b) + 1, e - s.find('{', b) - 1);
  const std::regex word(R"(\w+)");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), word); it != std::sregex_iterator(); ++it)
    r.push_back(it->str());
  return r;
}

std::vector<const OpDef*> table() {
  std::vector<const OpDef*> r;
  for (int i = 0; i < static_cast<int>(Op::kNumOps); ++i) r.push_back(&op_def(static_cast<Op>(i)));
  return r;
}

std::string spelled(const std::map<std::string, std::string>& names, const std::string& op) {
  auto it = names.find(op);
  return it == names.end() ? op : it->second;
}

// Whether `body` calls the C++ function `fn` (an operator: uses its symbol).
bool calls(const std::string& body, const std::string& fn) {
  if (fn.rfind("operator", 0) == 0) return body.find(" " + fn.substr(8) + " ") != std::string::npos;
  return std::regex_search(body, std::regex("\\b" + fn + "\\("));
}

TEST(OpNames, ListsNameOpsOfTheTable) {
  std::string error;
  for (const auto* names : {&kInternal, &kCpp, &kPython})
    for (const auto& [op, _] : *names)
      if (!op_by_name(op)) error += op + " is listed in tests/frontend/op_names_test.cpp but is no op of the table\n";
  for (const auto& [op, _] : kInternal)
    if (kCpp.count(op) || kPython.count(op)) error += op + " is internal and also given a user-facing name\n";
  const std::vector<std::string> spellings = enum_names();
  if (spellings.size() != static_cast<size_t>(Op::kNumOps))
    error += "read " + std::to_string(spellings.size()) + " names of enum Op from src/ir/op.h, for " +
             std::to_string(static_cast<int>(Op::kNumOps)) + " ops\n";
  EXPECT_TRUE(error.empty()) << error;
}

// Which of the functions a user-facing name has (their arities) take the
// op's operands; an error when the name has none (`missing` says where it
// should be) or none of them fits.
std::vector<size_t> fitting(const std::string& op, const OpDef& d, const std::vector<Arity>& arities, const std::string& missing,
                            std::string& error) {
  std::vector<size_t> r;
  std::string found;
  for (size_t i = 0; i < arities.size(); ++i) {
    found += (found.empty() ? "" : "; ") + arities[i].str();
    if (fits(arities[i], d)) r.push_back(i);
  }
  if (arities.empty())
    error += op + " is not " + missing + " (or list the op in kInternal with the reason users do not call it)\n";
  else if (r.empty())
    error += op + " takes " + found + ", the op takes " + arity_of(d) + "\n";
  return r;
}

TEST(OpNames, EveryUserOpHasATracerFunction) {
  const std::vector<CppFunction> declared = cpp_functions(read(kRoot / "include" / "tensorjit" / "tensor.h"));
  const std::vector<CppFunction> defined = cpp_functions(read(kRoot / "src" / "frontend" / "tracer.cpp"));
  const std::vector<std::string> spellings = enum_names();
  ASSERT_EQ(spellings.size(), static_cast<size_t>(Op::kNumOps));
  std::string error;
  int checked = 0;
  for (const OpDef* d : table()) {
    if (kInternal.count(d->name)) continue;
    const std::string fn = spelled(kCpp, d->name), op = std::string(d->name) + ": tj::" + fn;
    const std::string spelling = spellings[static_cast<size_t>(d->op)];
    std::vector<Arity> arities;
    for (const CppFunction& f : declared)
      if (f.name == fn && f.depth == 1) arities.push_back(f.arity);
    for (size_t i : fitting(op, *d, arities, "declared in include/tensorjit/tensor.h (give its spelling in kCpp if it has another name)",
                            error)) {
      const Arity& a = arities[i];
      bool emits = false;
      for (const CppFunction& g : defined)
        if (g.name == fn && g.arity.lo == a.lo && g.arity.hi == a.hi && g.arity.list == a.list)
          emits = emits || std::regex_search(g.body, std::regex("\\bOp::" + spelling + "\\b"));
      if (!emits) error += op + " (" + a.str() + ") has no definition in src/frontend/tracer.cpp that emits Op::" + spelling + "\n";
      ++checked;
    }
  }
  EXPECT_GT(checked, 60);
  EXPECT_TRUE(error.empty()) << error;
}

TEST(OpNames, EveryUserOpHasAPythonFunction) {
  const std::vector<PyBinding> bound = py_bindings();
  const std::set<std::string> exported = py_public();
  std::string error;
  int checked = 0;
  for (const OpDef* d : table()) {
    if (kInternal.count(d->name)) continue;
    const std::string py = spelled(kPython, d->name), fn = spelled(kCpp, d->name), op = std::string(d->name) + ": tensorjit." + py;
    std::vector<const PyBinding*> named;
    std::vector<Arity> arities;
    for (const PyBinding& b : bound)
      if (b.name == py) named.push_back(&b), arities.push_back(b.arity);
    const std::vector<size_t> fit =
        fitting(op, *d, arities, "bound in python/src/ (give its spelling in kPython if it has another name)", error);
    for (size_t i : fit) {
      if (!calls(named[i]->body, fn)) error += op + " does not call tj::" + fn + " (python/src/)\n";
      ++checked;
    }
    if (!fit.empty() && py.rfind("Tensor.", 0) != 0 && !exported.count(py))
      error += op + " is bound in _core but not public: python/tensorjit/__init__.py does not import it\n";
  }
  EXPECT_GT(checked, 60);
  EXPECT_TRUE(error.empty()) << error;
}

// docs/ir.md's op table: each op in the first column of a row, and nothing
// there that is not an op.
TEST(OpNames, EveryOpHasALineInTheIrDocs) {
  const std::string doc = read(kRoot / "docs" / "ir.md");
  const size_t b = doc.find("\n## Ops\n"), e = doc.find("\n## ", b + 1);
  ASSERT_NE(b, std::string::npos) << "docs/ir.md has no '## Ops' section";
  std::istringstream lines(doc.substr(b, e - b));
  std::set<std::string> documented;
  std::string error;
  const std::regex quoted("`([^`]*)`");
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const std::string cell = line.substr(1, line.find('|', 1) - 1);
    for (auto it = std::sregex_iterator(cell.begin(), cell.end(), quoted); it != std::sregex_iterator(); ++it) {
      std::istringstream words((*it)[1].str());
      for (std::string w; words >> w;) {
        documented.insert(w);
        if (!op_by_name(w)) error += "docs/ir.md documents " + w + ", which is no op of the table\n";
      }
    }
  }
  for (const OpDef* d : table())
    if (!documented.count(d->name)) error += std::string(d->name) + " has no line in docs/ir.md's op table\n";
  EXPECT_TRUE(error.empty()) << error;
}

}  // namespace
}  // namespace tj
