// Shape and dtype inference shared by the op rows (src/ir/ops/*.cpp): the
// context a row's InferFn sees, and the rules several rows use.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "tensorjit/error.h"

namespace tj {

struct InferCtx {
  const OpDef& def;
  const std::vector<Type>& in;
  std::vector<AttrValue>& attrs;

  [[noreturn]] void fail(const std::string& msg) const { throw ShapeError(msg); }
  template <class T>
  T& attr(std::string_view name) {
    return std::get<T>(attrs[static_cast<size_t>(attr_index(def, name))]);
  }
  int rank(size_t i) const { return in[i].rank(); }
  // Normalizes a possibly negative axis into [0, rank).
  int64_t axis(int64_t a, int rank) const {
    if (a < -rank || a >= rank) fail("axis " + std::to_string(a) + " out of range for rank " + std::to_string(rank));
    return a < 0 ? a + rank : a;
  }
};

namespace infer {

void require_float(const InferCtx& c, size_t i);
void require_int_scalar(const InferCtx& c, size_t i, const char* what);
void require_same_dtype(const InferCtx& c);
void check_dims_nonnegative(const InferCtx& c, const Shape& s);
// numpy broadcasting; a symbolic dim broadcasts only against itself or 1.
Shape broadcast(const InferCtx& c, const std::vector<const Shape*>& shapes);

Type float_unary(InferCtx& c);    // float -> same type
Type numeric_unary(InferCtx& c);  // int or float -> same type
Type binary(InferCtx& c);         // same numeric dtypes, broadcast
Type float_binary(InferCtx& c);
Type compare(InferCtx& c);        // same dtypes, broadcast, -> bool
Type logical(InferCtx& c);        // bools, broadcast, -> bool
Type integer_unary(InferCtx& c);  // integers (not bool) -> same type
Type integer_binary(InferCtx& c); // same integer dtypes (not bool), broadcast
// The reduced shape of operand 0 over attribute "axes" (normalized, sorted),
// keeping them as 1 when "keepdim".
Shape reduced_shape(InferCtx& c, std::vector<int64_t>& axes, bool keep);

}  // namespace infer

}  // namespace tj
