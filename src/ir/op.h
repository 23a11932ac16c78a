// The op table: every op is defined once, in ops.cpp, with its operand and
// attribute schema, category and shape/dtype inference. Printing, parsing,
// verification and interpretation all read from it; adding an op means one
// entry here, one row in ops.cpp, and one reference kernel in the interpreter.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tensorjit/type.h"

namespace tj {

enum class Op : uint8_t {
  // sources
  input, param, constant, iota,
  // unary elementwise
  neg, exp, log, tanh, sqrt, rsqrt, sin, cos, abs, sigmoid, recip, cast,
  // binary elementwise (numpy broadcasting)
  add, sub, mul, div, max, min, pow,
  // comparisons and selection
  eq, ne, lt, le, gt, ge, where,
  // reductions
  sum, amax, mean,
  // contraction
  matmul,
  // views
  reshape, permute, expand, slice, squeeze, unsqueeze,
  // data movement
  concat, gather,
  // composites
  softmax, rms_norm, layer_norm, silu, gelu,
  // special
  causal_mask, kv_write, flash_attn,
  // structured control flow: ops with subgraphs (regions); `result` reads
  // a multi-result op's result i >= 1 (the op's own value is result 0)
  while_loop, cond, result,
  kNumOps
};

enum class OpCategory : uint8_t { source, elementwise, reduction, matmul, view, movement, composite, special, control };
std::string_view category_name(OpCategory c);

enum class AttrKind : uint8_t { Int, Float, Bool, Ints, DimK, Dims, DTypeK, Data, RegionK };

// A constant's contents, in its dtype (ir/constant.h). One value for a
// tensor of many elements means a splat.
class ConstValues;
using ConstData = std::shared_ptr<const ConstValues>;

// A subgraph of a control-flow op: closed (everything it reads is an input,
// fed from the op's operands), printed before the graph that uses it and
// referred to as @name.
class Graph;
using Region = std::shared_ptr<const Graph>;

// Variant order matches AttrKind.
using AttrValue = std::variant<int64_t, double, bool, std::vector<int64_t>, Dim, Shape, DType, ConstData, Region>;

struct AttrSpec {
  const char* name;
  AttrKind kind;
  std::optional<AttrValue> default_value;  // nullopt: required
};

// What inference sees: operand types and the node's attributes (which it may
// canonicalize, e.g. normalize negative axes).
struct InferCtx;
using InferFn = Type (*)(InferCtx&);

struct OpDef {
  Op op;
  const char* name;
  OpCategory category;
  int min_inputs;
  int max_inputs;  // -1: variadic
  std::vector<AttrSpec> attrs;
  InferFn infer;  // null for input/param/const: their type is given
  bool commutative = false;
};

const OpDef& op_def(Op op);
std::optional<Op> op_by_name(std::string_view name);
int attr_index(const OpDef& def, std::string_view name);  // -1 if absent

}  // namespace tj
