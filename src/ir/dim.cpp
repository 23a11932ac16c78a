#include "tensorjit/dim.h"

#include <algorithm>
#include <cctype>
#include <functional>

#include "tensorjit/error.h"

namespace tj {

namespace {

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw Error("dimension arithmetic overflows 64 bits");
  return r;
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw Error("dimension arithmetic overflows 64 bits");
  return r;
}

}  // namespace

Dim Dim::symbol(std::string name) {
  Dim d;
  d.terms_.push_back({{std::move(name)}, 1});
  return d;
}

std::optional<int64_t> Dim::as_const() const {
  if (is_const()) return c_;
  return std::nullopt;
}

int64_t Dim::value() const {
  if (!is_const()) throw Error("dimension '" + str() + "' is symbolic where a concrete size is required");
  return c_;
}

// Higher degree first, then lexicographic: `S*T + 2*S + 1`.
bool Dim::monomial_less(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  if (a.size() != b.size()) return a.size() > b.size();
  return a < b;
}

void Dim::add_term(std::vector<std::string> syms, int64_t coeff) {
  if (coeff == 0) return;
  if (syms.empty()) {
    c_ = checked_add(c_, coeff);
    return;
  }
  auto it = std::lower_bound(terms_.begin(), terms_.end(), syms,
                             [](const Term& t, const std::vector<std::string>& s) { return monomial_less(t.syms, s); });
  if (it != terms_.end() && it->syms == syms) {
    it->coeff = checked_add(it->coeff, coeff);
    if (it->coeff == 0) terms_.erase(it);
  } else {
    terms_.insert(it, Term{std::move(syms), coeff});
  }
}

Dim operator+(const Dim& a, const Dim& b) {
  Dim r = a;
  r.c_ = checked_add(r.c_, b.c_);
  for (const auto& t : b.terms_) r.add_term(t.syms, t.coeff);
  return r;
}

Dim operator-(const Dim& a, const Dim& b) {
  Dim r = a;
  r.c_ = checked_add(r.c_, checked_mul(b.c_, -1));
  for (const auto& t : b.terms_) r.add_term(t.syms, checked_mul(t.coeff, -1));
  return r;
}

Dim operator*(const Dim& a, const Dim& b) {
  if (a.is_const() && b.is_const()) return Dim(checked_mul(a.c_, b.c_));
  // Products of sums grow fast: bound the terms and degrees so that no
  // expression (parsed text, or a fuzzed graph) takes unbounded time or memory.
  constexpr size_t kMaxTerms = 1024, kMaxDegree = 64;
  if ((a.terms_.size() + 1) * (b.terms_.size() + 1) > kMaxTerms) throw Error("dimension expression too large (over 1024 terms)");
  size_t da = 0, db = 0;
  for (const auto& t : a.terms_) da = std::max(da, t.syms.size());
  for (const auto& t : b.terms_) db = std::max(db, t.syms.size());
  if (da + db > kMaxDegree) throw Error("dimension expression too large (degree over 64)");
  // (sum_i a_i m_i + a0) * (sum_j b_j n_j + b0), expanded term by term.
  Dim r(checked_mul(a.c_, b.c_));
  for (const auto& t : a.terms_) r.add_term(t.syms, checked_mul(t.coeff, b.c_));
  for (const auto& t : b.terms_) r.add_term(t.syms, checked_mul(t.coeff, a.c_));
  for (const auto& s : a.terms_) {
    for (const auto& t : b.terms_) {
      std::vector<std::string> m = s.syms;
      m.insert(m.end(), t.syms.begin(), t.syms.end());
      std::sort(m.begin(), m.end());
      r.add_term(std::move(m), checked_mul(s.coeff, t.coeff));
    }
  }
  return r;
}

std::optional<Dim> Dim::div_exact(const Dim& d) const {
  if (d.terms_.size() > 1 || (d.terms_.size() == 1 && d.c_ != 0)) return std::nullopt;  // not a monomial
  int64_t dc = d.is_const() ? d.c_ : d.terms_[0].coeff;
  const std::vector<std::string> empty;
  const auto& dsyms = d.is_const() ? empty : d.terms_[0].syms;
  if (dc == 0) return std::nullopt;
  Dim r;
  auto divide = [&](const std::vector<std::string>& syms, int64_t coeff) -> bool {
    if (coeff % dc != 0) return false;
    // dsyms must be a sub-multiset of syms.
    std::vector<std::string> rest;
    std::vector<std::string> need = dsyms;
    for (const auto& s : syms) {
      auto it = std::find(need.begin(), need.end(), s);
      if (it != need.end()) need.erase(it);
      else rest.push_back(s);
    }
    if (!need.empty()) return false;
    r.add_term(std::move(rest), coeff / dc);
    return true;
  };
  if (c_ != 0 && !divide({}, c_)) return std::nullopt;
  for (const auto& t : terms_)
    if (!divide(t.syms, t.coeff)) return std::nullopt;
  return r;
}

bool Dim::operator<(const Dim& o) const {
  if (c_ != o.c_) return c_ < o.c_;
  if (terms_.size() != o.terms_.size()) return terms_.size() < o.terms_.size();
  for (size_t i = 0; i < terms_.size(); ++i) {
    if (terms_[i].syms != o.terms_[i].syms) return terms_[i].syms < o.terms_[i].syms;
    if (terms_[i].coeff != o.terms_[i].coeff) return terms_[i].coeff < o.terms_[i].coeff;
  }
  return false;
}

bool Dim::provably_positive() const {
  if (c_ <= 0) return false;
  for (const auto& t : terms_)
    if (t.coeff < 0) return false;
  return true;
}

int64_t Dim::eval(const SymEnv& env) const {
  int64_t v = c_;
  for (const auto& t : terms_) {
    int64_t m = t.coeff;
    for (const auto& s : t.syms) {
      auto it = env.find(s);
      if (it == env.end()) throw Error("size symbol '" + s + "' is not bound");
      m = checked_mul(m, it->second);
    }
    v = checked_add(v, m);
  }
  return v;
}

std::vector<std::string> Dim::symbols() const {
  std::vector<std::string> out;
  for (const auto& t : terms_) out.insert(out.end(), t.syms.begin(), t.syms.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string Dim::c_expr(std::string (*name)(const std::string&)) const {
  std::string s;
  for (const auto& t : terms_) {
    std::string term = std::to_string(t.coeff) + "LL";
    for (const auto& sym : t.syms) term += "*" + name(sym);
    s += (s.empty() ? "" : "+") + ("(" + term + ")");
  }
  if (c_ != 0 || s.empty()) s += (s.empty() ? "" : "+") + ("(" + std::to_string(c_) + "LL)");
  return s;
}

std::string Dim::str() const {
  if (is_const()) return std::to_string(c_);
  std::string s;
  auto emit = [&](int64_t coeff, const std::vector<std::string>& syms) {
    int64_t mag = coeff < 0 ? -coeff : coeff;
    if (s.empty()) {
      if (coeff < 0) s += "-";
    } else {
      s += coeff < 0 ? "-" : "+";
    }
    bool first = true;
    if (mag != 1 || syms.empty()) {
      s += std::to_string(mag);
      first = false;
    }
    for (const auto& sym : syms) {
      if (!first) s += "*";
      s += sym;
      first = false;
    }
  };
  for (const auto& t : terms_) emit(t.coeff, t.syms);
  if (c_ != 0) emit(c_, {});
  return s;
}

size_t Dim::hash() const {
  size_t h = std::hash<int64_t>()(c_);
  for (const auto& t : terms_) {
    h = h * 1000003u ^ std::hash<int64_t>()(t.coeff);
    for (const auto& s : t.syms) h = h * 1000003u ^ std::hash<std::string>()(s);
  }
  return h;
}

namespace {

// Recursive descent over `expr := term (('+'|'-') term)*`,
// `term := factor ('*' factor)*`, `factor := '-'* (int | ident | '(' expr ')')`.
// Unary minuses are counted in a loop and parentheses nest at most
// kMaxDimNesting deep, so no text can exhaust the stack.
constexpr int kMaxDimNesting = 64;

class DimParser {
 public:
  explicit DimParser(std::string_view t) : t_(t) {}
  Dim parse_all() {
    Dim d = expr();
    skip_ws();
    if (i_ != t_.size()) fail("unexpected '" + std::string(1, t_[i_]) + "' in dimension");
    return d;
  }
  size_t pos() const { return i_; }

 private:
  [[noreturn]] void fail(const std::string& msg) { throw Error(msg); }
  void skip_ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t')) ++i_;
  }
  Dim expr() {
    Dim d = term();
    for (;;) {
      skip_ws();
      if (i_ < t_.size() && (t_[i_] == '+' || t_[i_] == '-')) {
        char op = t_[i_++];
        Dim r = term();
        d = op == '+' ? d + r : d - r;
      } else {
        return d;
      }
    }
  }
  Dim term() {
    Dim d = factor();
    for (;;) {
      skip_ws();
      if (i_ < t_.size() && t_[i_] == '*') {
        ++i_;
        d = d * factor();
      } else {
        return d;
      }
    }
  }
  Dim factor() {
    bool negate = false;
    for (;;) {
      skip_ws();
      if (i_ >= t_.size() || t_[i_] != '-') break;
      ++i_;
      negate = !negate;
    }
    Dim d = primary();
    return negate ? -d : d;
  }
  Dim primary() {
    if (i_ >= t_.size()) fail("expected a dimension");
    char c = t_[i_];
    if (c == '(') {
      if (++depth_ > kMaxDimNesting) fail("dimension nested more than " + std::to_string(kMaxDimNesting) + " parentheses deep");
      ++i_;
      Dim d = expr();
      skip_ws();
      if (i_ >= t_.size() || t_[i_] != ')') fail("expected ')' in dimension");
      ++i_;
      --depth_;
      return d;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      int64_t v = 0;
      while (i_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[i_]))) {
        if (v > (INT64_MAX - 9) / 10) fail("dimension too large");
        v = v * 10 + (t_[i_++] - '0');
      }
      return Dim(v);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = i_;
      while (i_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[i_])) || t_[i_] == '_')) ++i_;
      return Dim::symbol(std::string(t_.substr(b, i_ - b)));
    }
    fail("unexpected '" + std::string(1, c) + "' in dimension");
  }

  std::string_view t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Dim Dim::parse(std::string_view text, size_t* error_offset) {
  DimParser p(text);
  try {
    return p.parse_all();
  } catch (const Error&) {
    if (error_offset) *error_offset = p.pos();
    throw;
  }
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ",";
    r += s[i].str();
  }
  return r + "]";
}

std::optional<int64_t> numel_const(const Shape& s) {
  int64_t n = 1;
  for (const auto& d : s) {
    auto c = d.as_const();
    if (!c) return std::nullopt;
    n = checked_mul(n, *c);
  }
  return n;
}

Dim numel(const Shape& s) {
  Dim n(1);
  for (const auto& d : s) n = n * d;
  return n;
}

std::vector<int64_t> eval_shape(const Shape& s, const SymEnv& env) {
  std::vector<int64_t> r;
  r.reserve(s.size());
  for (const auto& d : s) r.push_back(d.eval(env));
  return r;
}

}  // namespace tj
