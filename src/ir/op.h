// The op table: every op is defined once, in one row (src/ir/ops/, one file
// per family), with everything about it that is not one backend's kernel
// strategy: operand and attribute schema, category, shape/dtype inference,
// how it fuses, its FLOPs, its scalar function and C expression (pointwise
// ops), its decomposition (composites), its derivative rule. Printing, parsing, verification,
// interpretation, fusion, the cost model, decomposition and the C++ emitter
// all read the row; adding a pointwise op means one enum entry here and one
// row. Ops with a kernel of their own (reductions, matmul, attention, data
// movement) have their reference kernel in src/reference/kernels.cpp.
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
  erf, floor, ceil, round, sign, log1p, expm1, relu, softplus, leaky_relu, hardswish,
  tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, trunc,
  bitwise_not,
  // binary elementwise (numpy broadcasting)
  add, sub, mul, div, max, min, pow, mod, atan2,
  bitwise_and, bitwise_or, bitwise_xor, shift_left, shift_right,
  // comparisons, logic and selection
  eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_not, where, clip,
  // reductions
  sum, amax, mean, prod, argmax,
  // contraction
  matmul, conv,
  // windows
  max_pool, sum_pool,
  // views
  reshape, permute, expand, slice, squeeze, unsqueeze,
  // data movement
  concat, gather, scatter_add,
  // composites
  softmax, rms_norm, layer_norm, silu, gelu,
  // special
  causal_mask, kv_write, flash_attn,
  // flash attention's backward (ops/attention_grad.cpp)
  attn_lse, attn_dq, attn_dkv,
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

// How fusion treats an op: the kind of kernel it can be part of.
enum class Fuse : uint8_t {
  none,       // sources and control flow: no kernel
  pointwise,  // a value per output element from the operands at that element (`scalar`, `c_expr`)
  rowwise,    // a last-axis row computation with a row kernel of its own (softmax, norms)
  reduction,  // a reduction kernel, or a row kernel's statistic
  matmul,
  conv,       // a convolution kernel (its epilogue joins as matmul's does)
  attention,
  store,      // writes operand data into a buffer (concat, kv_write)
  view,       // free: an index transform of its operand
  generator,  // free when its operands are: a function of the index (iota, causal_mask)
  gather,     // free when its indices are: an indirect load
  lower,      // no kernel: always decomposed before fusion (`decompose`)
};

// An op's numeric attributes (Int, Float, Bool) as doubles, in schema order;
// other kinds read as 0. What scalar functions and C expressions see.
using ScalarAttrs = const double*;

// The reference scalar function of a pointwise op, per domain the
// interpreter computes in: floats in the compute type, integers and bools in
// int64 (wrapped to the result's width afterwards). Unused operands are 0.
// Null where the op does not take that domain.
struct ScalarFns {
  float (*f32)(float, float, float, ScalarAttrs) = nullptr;
  double (*f64)(double, double, double, ScalarAttrs) = nullptr;
  int64_t (*i64)(int64_t, int64_t, int64_t, ScalarAttrs) = nullptr;
};

// What a pointwise op's C expression is made from: its operands as C
// expressions, the result's and operand 0's C types, and its attributes.
struct CExpr {
  std::vector<std::string> a;
  std::string T, S;
  bool integer = false;  // the result is an integer (lit: or a bool)
  ScalarAttrs k = nullptr;
  // `form` with $0 $1 $2 (operands), $T (result type), $S (operand 0's type) replaced.
  std::string fmt(std::string_view form) const;
  // `v` as a literal of the result type (exact: hex floats).
  std::string lit(double v) const;
  std::string lit_int(int64_t v) const;  // exactly, INT64_MIN included
};
using CExprFn = std::string (*)(const CExpr&);

// FLOPs of one node, from its sizes (symbolic dims at the fusion hint).
struct CostArgs {
  const std::vector<std::vector<int64_t>>& in;
  const std::vector<int64_t>& out;
  ScalarAttrs k;
  int64_t out_elems() const;
  int64_t in_elems(size_t i) const;
};
using FlopsFn = int64_t (*)(const CostArgs&);

// A composite's expansion into other ops (ir/decomposer.h).
struct Decomposer;
using DecomposeFn = int32_t (*)(Decomposer&);

// Reverse mode: the cotangents of a node's operands from its result's
// (ir/differ.h; the autodiff stage, src/autodiff/, calls it).
struct Differ;
using GradFn = void (*)(Differ&);

// How an op's dims correspond to factors of its work, for sharding
// (ir/factors.h): the rule for node n with operand types in.
struct FactorRule;
struct Node;
using FactorFn = FactorRule (*)(const Node& n, const std::vector<Type>& in);

// How a Fuse::rowwise op's kernel computes one row, as data that every
// backend's row kernel prints (codegen/cpp and codegen/gpu render the same
// form; the op's meaning is its reference kernel and its decomposition).
// Passes run over the row in order; each may accumulate a statistic (in
// double) and write the output, then run statements once the statistic is
// complete. Expressions are C that C++ and GPU C share, with placeholders:
// $x, $w, $b the operands 0, 1, 2 at the element (as double), $y the
// output element an earlier pass wrote (as double), $t this pass's term,
// $D the row's length and $eps the attribute (as double); statistics and
// what `after` declares are plain names.
enum class RowReduce : uint8_t { sum, max };
struct RowPass {
  const char* stat = nullptr;  // the statistic this pass accumulates (nullptr: none)
  RowReduce reduce = RowReduce::sum;
  const char* term = nullptr;   // its term per element ($t in `store`)
  const char* store = nullptr;  // the output element, written in this pass (nullptr: none)
  const char* after = nullptr;  // statements once the statistic is complete
};
struct RowForm {
  std::vector<RowPass> passes;
};

// One op's row (src/ir/ops/*.cpp). Rows are written with designated
// initializers, in the order of these fields, naming only what the op has:
//
//   {.op = Op::exp, .name = "exp", .category = Cat::elementwise, .min_inputs = 1, .max_inputs = 1,
//    .infer = infer::float_unary, .fuse = Fuse::pointwise, .scalar = ..., .c_expr = ..., .grad = d_exp},
//
// The first five fields have no default: a row without one is a warning
// (-Wmissing-field-initializers). The others default to "none".
struct OpDef {
  // What the op is.
  Op op;                // its enum entry: the row's place in the table
  const char* name;     // its name in the IR text (docs/ir.md)
  OpCategory category;  // the group passes treat alike
  int min_inputs;       // operands: min_inputs to max_inputs
  int max_inputs;       // -1: any number
  std::vector<AttrSpec> attrs = {};  // its attribute schema, in order (ScalarAttrs' order)
  InferFn infer = nullptr;           // its result type; null for input/param/const: their type is given
  bool commutative = false;          // operands 0 and 1 may be swapped (CSE puts them in a canonical order where no bit changes: passes/cse.cpp)

  // How kernels take it, and its cost.
  Fuse fuse = Fuse::none;
  int flops = 1;               // per output element, unless flops_fn
  FlopsFn flops_fn = nullptr;  // FLOPs from the operands' sizes, for ops not costed per output element

  // Its math, where backends share it (an op with a kernel of its own means
  // what its reference kernel computes, src/reference/kernels.cpp).
  ScalarFns scalar = {};     // pointwise ops (cast's depends on dtypes: its kernel is in the interpreter)
  CExprFn c_expr = nullptr;  // pointwise ops, for the C++ backend
  // Pointwise ops, for the GPU backend (codegen/gpu): the expression in GPU
  // C, the C that OpenCL C and CUDA C share (no templates or namespaces;
  // helpers named by type, as tj_max_$T, from codegen/gpu/prelude.cpp; an
  // integer error sets *tj_status). Null: c_expr is already such C.
  CExprFn gpu_expr = nullptr;
  const char* c_helpers = nullptr;  // C++ that c_expr needs, emitted once into programs that use the op
  // Fuse::rowwise ops: the row kernel's form (a backend without it for an
  // op is an error naming the op, never another op's kernel).
  const RowForm* row_form = nullptr;
  DecomposeFn decompose = nullptr;  // composites (and Fuse::lower ops): the expansion into other ops
  // Integer results can be a runtime error (division by zero): such an op is
  // computed where it is, never recomputed lazily where read (which could
  // skip it), unless its divisor (operand 1) is a nonzero constant.
  bool int_divides = false;

  // Its derivative rule; null: not differentiable (an error when a
  // gradient must flow through it; integer and bool results never carry one).
  GradFn grad = nullptr;

  // How its dims correspond, for sharding (ir/factors.h); null: pointwise
  // ops broadcast, other ops take whole values.
  FactorFn factors = nullptr;
};

const OpDef& op_def(Op op);
// The pools (ir/ops/pool.cpp): kernels of KernelKind::pool.
inline bool is_pool(Op op) { return op == Op::max_pool || op == Op::sum_pool; }
// A node's numeric attributes as ScalarAttrs storage (see ScalarAttrs).
std::vector<double> scalar_attrs(const OpDef& def, const std::vector<AttrValue>& attrs);
std::optional<Op> op_by_name(std::string_view name);
int attr_index(const OpDef& def, std::string_view name);  // -1 if absent

}  // namespace tj
