// Parser for the text form printed by printer.cpp. A hand-written cursor
// parser: dims are handed to Dim::parse as raw text, everything else is read
// token by token. Every error carries line:column and the offending token.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <unordered_map>

#include "ir/text.h"
#include "tensorjit/error.h"
#include "tensorjit/ndarray.h"

namespace tj {

namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

class Parser {
 public:
  explicit Parser(std::string_view src) : s_(src) {}

  // Regions first (each a graph of its own, referred to later as @name), the
  // main graph last.
  Graph parse() {
    for (;;) {
      Graph g = parse_one();
      skip_blank_lines();
      if (at_end()) return g;
      std::string name = g.name();
      regions_[name] = std::make_shared<const Graph>(std::move(g));
    }
  }

 private:
  Graph parse_one() {
    values_.clear();
    skip_blank_lines();
    size_t name_at = (skip_space(), i_);
    expect_word("graph");
    Graph g(read_ident("graph name"));
    if (regions_.count(g.name())) fail_at(name_at, "graph defined twice", g.name());
    end_line();
    skip_blank_lines();
    if (s_.substr(i_).starts_with("mesh")) g.set_mesh(read_mesh());
    for (;;) {
      skip_blank_lines();
      if (at_end()) fail_here("unexpected end of input: expected 'return'");
      if (peek() == '%') {
        statement(g);
      } else {
        size_t at = i_;
        std::string w = read_ident("'input', 'param', '%value' or 'return'");
        if (w == "input" || w == "param") {
          declaration(g, w == "input", at);
        } else if (w == "return") {
          ret(g);
          return g;
        } else {
          fail_at(at, "expected 'input', 'param', '%value' or 'return'", w);
        }
      }
    }
  }

  // ---- errors --------------------------------------------------------------
  [[noreturn]] void fail_at(size_t at, const std::string& msg, std::string_view token) const {
    int line = 1, col = 1;
    for (size_t k = 0; k < at && k < s_.size(); ++k) {
      if (s_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    // Quote at most 40 characters of the token: a 100 MB line is not a message.
    constexpr size_t kMaxQuoted = 40;
    bool cut = token.size() > kMaxQuoted;
    if (cut) token = token.substr(0, kMaxQuoted);
    std::string tok;
    for (char c : token) {
      if (std::isprint(static_cast<unsigned char>(c))) {
        tok += c;
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
        tok += buf;
      }
    }
    if (cut) tok += "...";
    throw ParseError(line, col, tok.empty() ? msg : msg + " at '" + tok + "'");
  }
  [[noreturn]] void fail_here(const std::string& msg) const { fail_at(i_, msg, current_token()); }

  std::string_view current_token() const {
    if (at_end()) return "<end of input>";
    size_t e = i_;
    if (ident_char(s_[e]) || s_[e] == '%' || s_[e] == '-') {
      ++e;
      while (e < s_.size() && ident_char(s_[e])) ++e;
    } else {
      ++e;
    }
    return s_.substr(i_, e - i_);
  }

  // ---- characters ----------------------------------------------------------
  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[i_]; }
  void skip_space() {
    while (!at_end() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
    if (!at_end() && s_[i_] == '#')
      while (!at_end() && s_[i_] != '\n') ++i_;
  }
  void skip_blank_lines() {
    for (;;) {
      skip_space();
      if (!at_end() && s_[i_] == '\n') ++i_;
      else return;
    }
  }
  void end_line() {
    skip_space();
    if (at_end()) return;
    if (s_[i_] != '\n') fail_here("expected end of line");
    ++i_;
  }
  bool accept(char c) {
    skip_space();
    if (peek() == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) fail_here(std::string("expected '") + c + "'");
  }
  std::string read_ident(const char* what) {
    skip_space();
    if (at_end() || !ident_start(s_[i_])) fail_here(std::string("expected ") + what);
    size_t b = i_;
    while (!at_end() && ident_char(s_[i_])) ++i_;
    return std::string(s_.substr(b, i_ - b));
  }
  void expect_word(const char* w) {
    skip_space();
    size_t at = i_;
    std::string got = read_ident((std::string("'") + w + "'").c_str());
    if (got != w) fail_at(at, std::string("expected '") + w + "'", got);
  }

  // ---- values --------------------------------------------------------------
  // `%name` or `%123`; returns the text after '%'.
  std::string read_value_name(size_t* at) {
    skip_space();
    *at = i_;
    if (peek() != '%') fail_here("expected a %value");
    ++i_;
    size_t b = i_;
    while (!at_end() && ident_char(s_[i_])) ++i_;
    if (b == i_) fail_at(*at, "expected a value name after '%'", current_token());
    return std::string(s_.substr(b, i_ - b));
  }
  ValueId use_value() {
    size_t at;
    std::string name = read_value_name(&at);
    auto it = values_.find(name);
    if (it == values_.end()) fail_at(at, "use of undefined value", "%" + name);
    return it->second;
  }
  void define(const std::string& name, ValueId v, size_t at) {
    if (!values_.emplace(name, v).second) fail_at(at, "value defined twice", "%" + name);
  }

  // ---- types and dims ------------------------------------------------------
  Dim read_dim() {
    skip_space();
    size_t b = i_;
    int depth = 0;
    while (!at_end()) {
      char c = s_[i_];
      if (c == '(') ++depth;
      else if (c == ')' && depth > 0) --depth;
      else if (depth == 0 && (c == ',' || c == ']' || c == '}' || c == ')' || c == '@')) break;
      else if (c == '\n') break;
      ++i_;
    }
    std::string_view text = s_.substr(b, i_ - b);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    if (text.empty()) fail_at(b, "expected a dimension", current_token_at(b));
    size_t off = 0;
    try {
      return Dim::parse(text, &off);
    } catch (const Error& e) {
      fail_at(b + off, e.what(), text.substr(std::min(off, text.size())));
    }
  }
  std::string_view current_token_at(size_t at) {
    size_t save = i_;
    i_ = at;
    auto t = current_token();
    i_ = save;
    return t;
  }
  // In a type, dims must not be negative; attribute dims are checked by
  // inference. With `axes`, a dim may name the mesh axes that split it
  // (`2048@tp`, `2048@(dp,tp)`: ir/sharding.h), one entry per dim.
  Shape read_dims(bool in_type = false, std::vector<std::vector<std::string>>* axes = nullptr) {
    expect('[');
    Shape s;
    if (accept(']')) return s;
    do {
      size_t at = (skip_space(), i_);
      s.push_back(read_dim());
      if (auto v = s.back().as_const(); in_type && v && *v < 0) fail_at(at, "negative dimension in type", s.back().str());
      if (!axes) continue;
      axes->emplace_back();
      if (!accept('@')) continue;
      if (accept('(')) {
        do axes->back().push_back(read_ident("a mesh axis"));
        while (accept(','));
        expect(')');
      } else {
        axes->back().push_back(read_ident("a mesh axis"));
      }
    } while (accept(','));
    expect(']');
    return s;
  }
  // A type with its sharding, if it has one: `f32[2048@tp, 256] partial(tp)`.
  std::pair<Type, std::optional<Sharding>> read_sharded_type() {
    std::vector<std::vector<std::string>> axes;
    Type t = read_type(&axes);
    Sharding s{std::move(axes), {}};
    skip_space();
    if (s_.substr(i_).starts_with("partial")) {
      expect_word("partial");
      expect('(');
      do {
        std::string axis = read_ident("a mesh axis");
        Reduction r = Reduction::sum;
        if (accept(':')) {
          size_t at = (skip_space(), i_);
          std::string name = read_ident("a reduction (sum, max, min)");
          auto pr = parse_reduction(name);
          if (!pr) fail_at(at, "unknown reduction (sum, max or min)", name);
          r = *pr;
        }
        s.partial.emplace_back(std::move(axis), r);
      } while (accept(','));
      expect(')');
    }
    if (s.replicated()) return {t, std::nullopt};
    return {t, std::move(s)};
  }
  void annotate(Graph& g, ValueId v, const std::optional<Sharding>& s, size_t at) {
    if (!s) return;
    try {
      check_sharding(g.mesh(), g.type(v), *s);
    } catch (const Error& e) {
      fail_at(at, e.what(), sharded_type_str(g.type(v), &*s));
    }
    g.set_sharding(v, *s);
  }
  // `mesh {dp=2, tp=2}`: after the graph line, before any value.
  Mesh read_mesh() {
    expect_word("mesh");
    expect('{');
    Mesh m;
    do {
      size_t at = (skip_space(), i_);
      std::string name = read_ident("a mesh axis name");
      if (m.axis(name) >= 0) fail_at(at, "mesh axis named twice", name);
      expect('=');
      size_t size_at = (skip_space(), i_);
      int64_t size = read_int();
      if (size < 1 || size > (int64_t{1} << 20)) fail_at(size_at, "a mesh axis has 1 to 2^20 devices", current_token_at(size_at));
      m.axes.push_back({name, size});
      if (m.devices() > (int64_t{1} << 20)) fail_at(size_at, "a mesh of more than 2^20 devices", current_token_at(size_at));
    } while (accept(','));
    expect('}');
    end_line();
    return m;
  }
  Type read_type(std::vector<std::vector<std::string>>* axes = nullptr) {
    skip_space();
    size_t at = i_;
    std::string name = read_ident("a type such as f32[2,3]");
    auto dt = parse_dtype(name);
    if (!dt) fail_at(at, "unknown dtype", name);
    Type t{*dt, {}};
    if (peek() != '[') fail_here("expected '[' after dtype");
    t.shape = read_dims(/*in_type=*/true, axes);
    // Concrete sizes must fit: element count and bytes in 63 bits.
    std::vector<int64_t> concrete;
    for (const Dim& d : t.shape)
      if (auto c = d.as_const()) concrete.push_back(*c);
    try {
      (void)checked_numel(concrete, t.dtype);
    } catch (const Error& e) {
      fail_at(at, e.what(), t.str());
    }
    return t;
  }

  // ---- numbers -------------------------------------------------------------
  std::string_view number_text() {
    skip_space();
    size_t b = i_;
    if (peek() == '-' || peek() == '+') ++i_;
    while (!at_end() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' ||
                         ((s_[i_] == '-' || s_[i_] == '+') && (s_[i_ - 1] == 'e' || s_[i_ - 1] == 'E'))))
      ++i_;
    return s_.substr(b, i_ - b);
  }
  int64_t read_int() {
    size_t b = (skip_space(), i_);
    auto t = number_text();
    int64_t v = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || p != t.data() + t.size()) fail_at(b, "expected an integer", t.empty() ? current_token() : t);
    return v;
  }
  double read_float() {
    size_t b = (skip_space(), i_);
    auto t = number_text();
    // An integer literal that a double cannot hold exactly (constant data
    // is held as doubles): remembered, and refused if the constant is an integer.
    int64_t iv = 0;
    auto [ip, iec] = std::from_chars(t.data(), t.data() + t.size(), iv);
    bool integer_text = ip == t.data() + t.size() && !t.empty();
    bool inexact = integer_text && (iec == std::errc::result_out_of_range ||
                                    (iec == std::errc() && static_cast<long double>(static_cast<double>(iv)) != static_cast<long double>(iv)));
    if (inexact && inexact_at_ == std::string::npos) inexact_at_ = b;
    std::string_view u = t;
    bool negative = !u.empty() && u[0] == '-';
    if (!u.empty() && (u[0] == '-' || u[0] == '+')) u.remove_prefix(1);
    if (u == "inf") return negative ? -INFINITY : INFINITY;
    if (u == "nan") return NAN;
    double v = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || p != t.data() + t.size()) fail_at(b, "expected a number", t.empty() ? current_token() : t);
    return v;
  }
  bool read_bool() {
    size_t at = (skip_space(), i_);
    std::string w = read_ident("true or false");
    if (w == "true") return true;
    if (w == "false") return false;
    fail_at(at, "expected true or false", w);
  }

  AttrValue read_attr(AttrKind kind) {
    switch (kind) {
      case AttrKind::Int: return read_int();
      case AttrKind::Float: return read_float();
      case AttrKind::Bool: return read_bool();
      case AttrKind::Ints: {
        std::vector<int64_t> v;
        expect('[');
        if (!accept(']')) {
          do v.push_back(read_int());
          while (accept(','));
          expect(']');
        }
        return v;
      }
      case AttrKind::DimK: return read_dim();
      case AttrKind::Dims: return read_dims();
      case AttrKind::DTypeK: {
        size_t at = (skip_space(), i_);
        std::string w = read_ident("a dtype");
        auto dt = parse_dtype(w);
        if (!dt) fail_at(at, "unknown dtype", w);
        return *dt;
      }
      case AttrKind::RegionK: {
        expect('@');
        size_t at = i_;
        std::string name = read_ident("a graph name");
        auto it = regions_.find(name);
        if (it == regions_.end()) fail_at(at, "no graph @" + name + " defined before this use", name);
        return it->second;
      }
      case AttrKind::Data: {
        std::vector<double> v;
        if (accept('[')) {
          if (!accept(']')) {
            do v.push_back(read_float());
            while (accept(','));
            expect(']');
          }
        } else {
          v.push_back(read_float());
        }
        return ConstValues::of(DType::f64, v);  // exact; converted to the declared dtype once it is read
      }
    }
    fail_here("bad attribute kind");
  }

  // Constant values must be exactly representable in their dtype (floats may
  // round, but not overflow to infinity).
  void check_const_values(const ConstValues& values, DType t, size_t at, const std::string& token) const {
    for (size_t i = 0; i < values.size(); ++i) {
      double v = values[i];
      std::string bad;
      if (t == DType::boolean) {
        if (v != 0 && v != 1) bad = "a bool constant must be 0 or 1";
      } else if (is_int(t)) {
        // u64 may be written as its bits (a negative int64) or its value.
        double lo = t == DType::u64 ? -9223372036854775808.0 : int_min(t);
        double hi = t == DType::i64 ? 9223372036854774784.0 : t == DType::u64 ? 18446744073709549568.0 : int_max(t);
        if (!std::isfinite(v) || std::trunc(v) != v) bad = "an integer constant must be a whole number";
        else if (v < lo || v > hi) bad = "integer constant out of range for " + std::string(dtype_name(t));
      } else if (std::isfinite(v) && !std::isfinite(round_to_dtype(v, t))) {
        bad = "constant overflows " + std::string(dtype_name(t));
      }
      if (!bad.empty()) fail_at(at, bad, token);
    }
  }

  // ---- lines ---------------------------------------------------------------
  void declaration(Graph& g, bool is_input, size_t at) {
    size_t name_at;
    std::string name = read_value_name(&name_at);
    if (!ident_start(name[0])) fail_at(name_at, "input and param names must start with a letter", "%" + name);
    expect(':');
    size_t type_at = (skip_space(), i_);
    auto [t, sharding] = read_sharded_type();
    end_line();
    (void)at;
    if (values_.count(name)) fail_at(name_at, "value defined twice", "%" + name);
    ValueId v = is_input ? g.add_input(name, t) : g.add_param(name, t);
    annotate(g, v, sharding, type_at);
    define(name, v, name_at);
  }

  void statement(Graph& g) {
    size_t name_at;
    std::string name = read_value_name(&name_at);
    if (values_.count(name)) fail_at(name_at, "value defined twice", "%" + name);
    expect('=');
    skip_space();
    size_t op_at = i_;
    std::string opname = read_ident("an op name");
    auto op = op_by_name(opname);
    if (!op) fail_at(op_at, "unknown op", opname);
    if (*op == Op::input || *op == Op::param) fail_at(op_at, "inputs and params are declared as 'input %name : type'", opname);
    const OpDef& def = op_def(*op);

    std::vector<ValueId> operands;
    if (accept('(')) {
      if (!accept(')')) {
        do operands.push_back(use_value());
        while (accept(','));
        expect(')');
      }
    }
    int n = static_cast<int>(operands.size());
    if (n < def.min_inputs || (def.max_inputs >= 0 && n > def.max_inputs)) {
      std::string want = def.max_inputs < 0 ? "at least " + std::to_string(def.min_inputs)
                         : def.min_inputs == def.max_inputs ? std::to_string(def.min_inputs)
                                                            : std::to_string(def.min_inputs) + " to " + std::to_string(def.max_inputs);
      fail_at(op_at, opname + " takes " + want + " operands, got " + std::to_string(n), opname);
    }

    std::vector<std::optional<AttrValue>> slots(def.attrs.size());
    inexact_at_ = std::string::npos;
    if (accept('{')) {
      if (!accept('}')) {
        do {
          skip_space();
          size_t at = i_;
          std::string key = read_ident("an attribute name");
          int idx = attr_index(def, key);
          if (idx < 0) fail_at(at, opname + " has no attribute '" + key + "'", key);
          if (slots[static_cast<size_t>(idx)]) fail_at(at, "attribute given twice", key);
          expect('=');
          slots[static_cast<size_t>(idx)] = read_attr(def.attrs[static_cast<size_t>(idx)].kind);
        } while (accept(','));
        expect('}');
      }
    }
    std::vector<AttrValue> attrs;
    for (size_t k = 0; k < slots.size(); ++k) {
      if (slots[k]) attrs.push_back(std::move(*slots[k]));
      else if (def.attrs[k].default_value) attrs.push_back(*def.attrs[k].default_value);
      else fail_at(op_at, opname + " needs attribute '" + def.attrs[k].name + "'", opname);
    }
    expect(':');
    skip_space();
    size_t type_at = i_;
    auto [declared, sharding] = read_sharded_type();
    end_line();

    ValueId v;
    if (*op == Op::constant) {
      if (is_int(declared.dtype) && inexact_at_ != std::string::npos)
        fail_at(inexact_at_, "integer constant is not exact: constants are read as doubles, exact up to 2^53", current_token_at(inexact_at_));
      check_const_values(*std::get<ConstData>(attrs[0]), declared.dtype, op_at, opname);
      try {
        v = g.add_const(declared, std::get<ConstData>(attrs[0]));
      } catch (const Error& e) {
        fail_at(op_at, e.what(), opname);
      }
    } else {
      try {
        v = g.add_raw(*op, std::move(operands), std::move(attrs));
      } catch (const Error& e) {
        fail_at(op_at, e.what(), opname);
      }
      if (g.type(v) != declared)
        fail_at(type_at, "declared type " + declared.str() + " differs from inferred type " + g.type(v).str(),
                declared.str());
    }
    annotate(g, v, sharding, type_at);
    define(name, v, name_at);
  }

  void ret(Graph& g) {
    std::vector<ValueId> outs;
    skip_space();
    if (peek() != '\n' && !at_end()) {
      do outs.push_back(use_value());
      while (accept(','));
    }
    end_line();
    skip_blank_lines();
    if (!at_end() && !s_.substr(i_).starts_with("graph")) fail_here("unexpected text after 'return'");
    g.set_outputs(std::move(outs));
  }

  std::string_view s_;
  size_t i_ = 0;
  size_t inexact_at_ = std::string::npos;  // an integer literal a double does not hold exactly
  std::unordered_map<std::string, ValueId> values_;
  std::unordered_map<std::string, Region> regions_;
};

}  // namespace

Graph parse_graph(std::string_view text) { return Parser(text).parse(); }

}  // namespace tj
