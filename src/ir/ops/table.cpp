// The op table: the rows of every family (src/ir/ops/*.cpp) in enum order,
// lookups by op and name, and type inference's entry point.
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <unordered_map>

#include "ir/ops/infer.h"
#include "ir/ops/rows.h"

namespace tj {

namespace {

const std::vector<OpDef>& table() {
  static const std::vector<OpDef> t = [] {
    const OpDef missing{.op = Op::kNumOps, .name = nullptr, .category = OpCategory::source, .min_inputs = 0, .max_inputs = 0};
    std::vector<OpDef> v(static_cast<size_t>(Op::kNumOps), missing);
    for (auto family : {rows::structure, rows::elementwise, rows::composite, rows::special, rows::attention_grad, rows::conv, rows::pool})
      for (OpDef& d : family()) {
        size_t i = static_cast<size_t>(d.op);
        if (i >= v.size() || v[i].name) throw std::logic_error("op table: " + std::string(d.name) + " defined twice or out of range");
        if (d.min_inputs < 0 || (d.max_inputs != -1 && d.max_inputs < d.min_inputs))
          throw std::logic_error("op table: " + std::string(d.name) + ": operand counts out of order");
        if ((d.fuse == Fuse::pointwise) != (d.c_expr != nullptr))
          throw std::logic_error("op table: " + std::string(d.name) + ": pointwise ops, and only they, have a C expression");
        if (d.gpu_expr && d.fuse != Fuse::pointwise) throw std::logic_error("op table: " + std::string(d.name) + ": a GPU expression but not pointwise");
        if ((d.fuse == Fuse::rowwise) != (d.row_form != nullptr))
          throw std::logic_error("op table: " + std::string(d.name) + ": rowwise ops, and only they, have a row kernel form");
        if (d.fuse == Fuse::lower && !d.decompose) throw std::logic_error("op table: " + std::string(d.name) + " must be lowered but has no decomposition");
        v[i] = std::move(d);
      }
    for (size_t i = 0; i < v.size(); ++i)
      if (!v[i].name) throw std::logic_error("op table incomplete at op " + std::to_string(i));
    return v;
  }();
  return t;
}

}  // namespace

std::vector<double> scalar_attrs(const OpDef& def, const std::vector<AttrValue>& attrs) {
  std::vector<double> k(def.attrs.size(), 0.0);
  for (size_t i = 0; i < def.attrs.size() && i < attrs.size(); ++i) {
    if (const auto* v = std::get_if<int64_t>(&attrs[i])) k[i] = static_cast<double>(*v);
    else if (const auto* f = std::get_if<double>(&attrs[i])) k[i] = *f;
    else if (const auto* b = std::get_if<bool>(&attrs[i])) k[i] = *b ? 1.0 : 0.0;
  }
  return k;
}

std::string CExpr::fmt(std::string_view form) const {
  std::string s;
  for (size_t i = 0; i < form.size(); ++i) {
    char c = form[i];
    if (c != '$' || i + 1 == form.size()) {
      s += c;
      continue;
    }
    char n = form[++i];
    if (n == 'T') s += T;
    else if (n == 'S') s += S;
    else if (n >= '0' && n <= '9' && static_cast<size_t>(n - '0') < a.size()) s += a[static_cast<size_t>(n - '0')];
    else throw std::logic_error("C expression: bad placeholder in " + std::string(form));
  }
  return s;
}

std::string CExpr::lit(double v) const {
  if (integer)  // constants are doubles in [-2^63, 2^63)
    return lit_int(v <= -9223372036854775808.0 ? std::numeric_limits<int64_t>::min() : static_cast<int64_t>(v));
  if (std::isnan(v)) return "(" + T + ")NAN";
  if (std::isinf(v)) return v > 0 ? "(" + T + ")INFINITY" : "(" + T + ")(-INFINITY)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return "(" + T + ")" + std::string(buf);
}

std::string CExpr::lit_int(int64_t v) const {
  if (v == std::numeric_limits<int64_t>::min()) return "(" + T + ")(-9223372036854775807LL-1)";  // no literal of its own
  return "(" + T + ")" + std::to_string(v) + "LL";
}

int64_t CostArgs::out_elems() const {
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  return n;
}

int64_t CostArgs::in_elems(size_t i) const {
  int64_t n = 1;
  for (int64_t d : in.at(i)) n *= d;
  return n;
}

std::string_view category_name(OpCategory c) {
  static constexpr std::array<std::string_view, 9> names = {"source", "elementwise", "reduction", "matmul", "view",
                                                            "movement", "composite", "special", "control"};
  return names[static_cast<size_t>(c)];
}

const OpDef& op_def(Op op) { return table()[static_cast<size_t>(op)]; }

std::optional<Op> op_by_name(std::string_view name) {
  static const auto index = [] {
    std::unordered_map<std::string_view, Op> m;
    for (const auto& d : table()) m.emplace(d.name, d.op);
    return m;
  }();
  auto it = index.find(name);
  if (it == index.end()) return std::nullopt;
  return it->second;
}

int attr_index(const OpDef& def, std::string_view name) {
  for (size_t i = 0; i < def.attrs.size(); ++i)
    if (name == def.attrs[i].name) return static_cast<int>(i);
  return -1;
}

Type infer_type(Op op, const std::vector<Type>& operand_types, std::vector<AttrValue>& attrs) {
  const OpDef& def = op_def(op);
  auto describe = [&] {
    std::string s = std::string(def.name) + "(";
    for (size_t i = 0; i < operand_types.size(); ++i) s += (i ? ", " : "") + operand_types[i].str();
    return s + ")";
  };
  int n = static_cast<int>(operand_types.size());
  if (n < def.min_inputs || (def.max_inputs >= 0 && n > def.max_inputs))
    throw ShapeError(describe() + ": wrong number of operands (" + std::to_string(n) + ")");
  if (!def.infer) throw ShapeError(describe() + ": type of a source op must be given");
  // u64 is held as an int64's bits: the ops whose meaning differs for
  // unsigned values (order, division, sign, conversion to float) refuse it,
  // rather than compute a signed answer (the ONNX importer orders u64
  // values through a biased i64 instead).
  for (const Type& t : operand_types) {
    if (t.dtype != DType::u64) continue;
    bool differs = false;
    switch (op) {
      case Op::div: case Op::mod: case Op::max: case Op::min: case Op::lt: case Op::le: case Op::gt: case Op::ge:
      case Op::sign: case Op::abs: case Op::relu: case Op::clip: case Op::amax: case Op::argmax: case Op::shift_right:
        differs = true;
        break;
      case Op::cast: differs = !attrs.empty() && std::holds_alternative<DType>(attrs[0]) && is_float(std::get<DType>(attrs[0])); break;
      default: break;
    }
    if (differs)
      throw UnsupportedOperand(describe() + ": u64 operands are not supported here (u64 is held as int64 bits; this op's unsigned meaning differs)");
  }
  InferCtx ctx{def, operand_types, attrs};
  try {
    return def.infer(ctx);
  } catch (const ShapeError& e) {
    throw ShapeError(describe() + ": " + e.what());
  } catch (const std::bad_variant_access&) {
    throw ShapeError(describe() + ": attribute of the wrong kind");
  }
}

}  // namespace tj
