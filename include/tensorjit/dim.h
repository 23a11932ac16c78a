// A tensor dimension: a concrete integer or a polynomial over named size
// symbols (`S`, `S+1`, `2*S`, `B*T`), kept in canonical form so that equal
// expressions compare equal with ==. Rank is always static; only sizes may be
// symbolic.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tj {

using SymEnv = std::map<std::string, int64_t, std::less<>>;

class Dim {
 public:
  Dim(int64_t c = 0) : c_(c) {}  // NOLINT: implicit from integers on purpose
  static Dim symbol(std::string name);
  // Parses `2*S+1`, `(S+1)*T`, `-3`; throws tj::Error with the offset of the
  // first bad character in `*error_offset` when given.
  static Dim parse(std::string_view text, size_t* error_offset = nullptr);

  bool is_const() const { return terms_.empty(); }
  std::optional<int64_t> as_const() const;
  int64_t value() const;  // throws if symbolic

  friend Dim operator+(const Dim& a, const Dim& b);
  friend Dim operator-(const Dim& a, const Dim& b);
  friend Dim operator*(const Dim& a, const Dim& b);
  Dim operator-() const { return Dim(0) - *this; }
  // Exact division: nullopt unless every term of *this is divisible by `d`,
  // which must be a monomial (a constant times a product of symbols).
  std::optional<Dim> div_exact(const Dim& d) const;

  bool operator==(const Dim& o) const { return c_ == o.c_ && terms_ == o.terms_; }
  bool operator!=(const Dim& o) const { return !(*this == o); }
  bool operator<(const Dim& o) const;  // an arbitrary total order, for maps

  int64_t eval(const SymEnv& env) const;  // throws if a symbol is unbound
  // > 0 for every value of the symbols (sizes, so >= 0): a positive constant
  // and no negative coefficient.
  bool provably_positive() const;
  std::vector<std::string> symbols() const;
  std::string str() const;
  // As a C/C++ int64 expression, each symbol spelled by `name`.
  std::string c_expr(std::string (*name)(const std::string&)) const;
  size_t hash() const;

 private:
  struct Term {
    std::vector<std::string> syms;  // sorted, with repetition for powers
    int64_t coeff;
    bool operator==(const Term&) const = default;
  };
  static bool monomial_less(const std::vector<std::string>& a, const std::vector<std::string>& b);
  void add_term(std::vector<std::string> syms, int64_t coeff);

  int64_t c_ = 0;
  std::vector<Term> terms_;  // canonical order, no zero coefficients
};

using Shape = std::vector<Dim>;

std::string shape_str(const Shape& s);  // "[2,S,16]"
std::optional<int64_t> numel_const(const Shape& s);
Dim numel(const Shape& s);
std::vector<int64_t> eval_shape(const Shape& s, const SymEnv& env);

}  // namespace tj
