// The tracing frontend. A tj::Tensor is a proxy: it holds no data, only a
// value in the graph its Tracer is building. Calling ordinary C++ code with
// proxies records the graph: loops unroll, `if` on C++ values specializes,
// C++ scalars become constants. Shape errors throw tj::ShapeError naming the
// op and its operand types. Tracing never allocates tensor data, so a
// Llama-3.1-8B layer is traced shape-only.
//
//   tj::Tracer t("mlp");
//   auto x = t.input("x", tj::DType::f32, {tj::Dim::symbol("T"), 128});
//   auto w = t.param("w", tj::DType::f32, {128, 64});
//   tj::TracedGraph g = t.finish({tj::gelu(tj::matmul(x, w)) * 0.5});
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <variant>
#include <vector>

#include "tensorjit/error.h"
#include "tensorjit/graph.h"
#include "tensorjit/type.h"

namespace tj {

class Tracer;
class Tensor;
class NDArray;
using ValueId = int32_t;  // a value of the graph being traced

// Python-style indexing (Tensor::index): a range of an axis, or one position
// (which drops the axis). Negative positions count from the end of a
// concrete axis; an absent end is the axis' end.
struct Range {
  Dim start = 0;
  std::optional<Dim> end;
  int64_t step = 1;
};
using Index = std::variant<Range, int64_t>;
inline const Range all{};  // x[:]
inline Range range(Dim start, Dim end, int64_t step = 1) { return {std::move(start), std::move(end), step}; }
inline Range from(Dim start) { return {std::move(start), std::nullopt, 1}; }

// A Tensor must not outlive its Tracer: the tracer counts the proxies that
// hold each value (what a graph break must keep).
class Tensor {
 public:
  Tensor() = default;
  Tensor(Tracer* t, ValueId v);
  Tensor(const Tensor& o) : Tensor(o.t_, o.v_) {}
  Tensor(Tensor&& o) noexcept : t_(o.t_), v_(o.v_) { o.t_ = nullptr; }
  Tensor& operator=(const Tensor& o);
  Tensor& operator=(Tensor&& o) noexcept;
  ~Tensor();

  const Type& type() const;
  DType dtype() const { return type().dtype; }
  const Shape& shape() const { return type().shape; }
  int rank() const { return type().rank(); }
  const Dim& dim(int axis) const;  // negative axes count from the end
  ValueId id() const { return v_; }
  Tracer* tracer() const { return t_; }
  bool defined() const { return t_ != nullptr; }

  // Reading a value while tracing is data-dependent: under tj::jit it is a
  // graph break (the value is computed and returned); in a plain Tracer it
  // throws. `where` names the call site in explanations.
  double item(std::source_location where = std::source_location::current()) const;
  explicit operator bool() const { return item() != 0; }

  // x.index({tj::all, tj::range(0, half), 2}) is x[:, 0:half, 2]; axes not
  // given are taken whole.
  Tensor index(const std::vector<Index>& idx) const;
  Tensor reshape(Shape shape) const;
  Tensor transpose(int64_t a = -2, int64_t b = -1) const;
  Tensor slice(int64_t axis, Dim start, Dim end, int64_t step = 1) const;

 private:
  Tracer* t_ = nullptr;
  ValueId v_ = -1;
};

class Tracer {
 public:
  explicit Tracer(std::string name = "main");
  // A region's tracer (tj::while_loop, tj::cond): tensors of `parent` (or its
  // ancestors) used here become inputs of the region, in order of first use.
  Tracer(std::string name, Tracer* parent);
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;
  ~Tracer();

  Tensor input(std::string name, DType dtype, Shape shape);
  Tensor param(std::string name, DType dtype, Shape shape);
  Tensor constant(DType dtype, Shape shape, std::vector<double> data);
  // An array's values, exactly (integers above 2^53 included).
  Tensor constant(const NDArray& values);
  Tensor scalar(double value, DType dtype);

  const Graph& graph() const { return *g_; }  // the IR being built (src/ir/graph.h)
  // How many Tensor proxies hold value v now.
  int holders(ValueId v) const { return static_cast<size_t>(v) < holders_.size() ? holders_[static_cast<size_t>(v)] : 0; }
  // What item() calls (the JIT's graph break); unset: item() throws.
  using ValueReader = std::function<double(const Tensor&, const std::source_location&)>;
  void set_value_reader(ValueReader r) { reader_ = std::move(r); }
  double read_value(const Tensor& t, const std::source_location& where);
  // A region's captures so far: the outer tensors, in order of their inputs.
  const std::vector<Tensor>& captures() const { return captures_; }
  // Makes the next `outer` tensors this tracer's next inputs (named c0, c1, ...).
  void capture(const std::vector<Tensor>& outer);
  // Sets the outputs and hands over the graph; the tracer is empty afterwards.
  TracedGraph finish(const std::vector<Tensor>& outputs);

 private:
  friend class Tensor;
  friend struct TracerAccess;  // src/frontend/emit.h: adding nodes
  void hold(ValueId v, int delta);
  ValueId operand(const Tensor& t, const char* op);  // this trace's value for t, capturing outer tensors
  bool is_ancestor(const Tracer* t) const;
  std::unique_ptr<Graph> g_;
  Tracer* parent_ = nullptr;
  std::vector<Tensor> captures_;
  std::vector<std::pair<std::pair<const Tracer*, ValueId>, ValueId>> captured_;  // outer value -> input here
  std::vector<int> holders_;
  ValueReader reader_;
};

// ---- elementwise -----------------------------------------------------------
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& a);

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor recip(const Tensor& x);
Tensor cast(const Tensor& x, DType to, bool saturate = true);  // saturate: float8 targets only (docs/ir.md)
Tensor erf(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);  // halves to even
Tensor sign(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor softplus(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double alpha = 0.01);
Tensor hardswish(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor asinh(const Tensor& x);
Tensor acosh(const Tensor& x);
Tensor atanh(const Tensor& x);
Tensor trunc(const Tensor& x);  // toward zero
Tensor atan2(const Tensor& a, const Tensor& b);  // the angle of (b, a), in (-pi, pi]
// The bits of integers (not bool: use logical_*).
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_not(const Tensor& x);
// a * 2^b and floor(a / 2^b) (arithmetic; not for u64), 0 (or the sign) once b reaches 64.
Tensor shift_left(const Tensor& a, const Tensor& b);
Tensor shift_right(const Tensor& a, const Tensor& b);

Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, double b);
Tensor maximum(double a, const Tensor& b);
Tensor minimum(const Tensor& a, double b);
Tensor minimum(double a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double b);  // x^2, x^3, roots and reciprocals as products and roots (as ATen)
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor where(const Tensor& cond, double a, const Tensor& b);
// Comparisons as operators (bool tensors); scalars take the other side's dtype.
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, double b);
Tensor operator<=(const Tensor& a, double b);
Tensor operator>(const Tensor& a, double b);
Tensor operator>=(const Tensor& a, double b);
// The remainder of floor division (sign of b, as Python), or with `fmod` of
// truncating division (sign of a, as C's fmod and %).
Tensor mod(const Tensor& a, const Tensor& b, bool fmod = false);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);
// min(max(x, lo), hi), broadcasting.
Tensor clip(const Tensor& x, const Tensor& lo, const Tensor& hi);
Tensor clip(const Tensor& x, double lo, double hi);

// ---- reductions ------------------------------------------------------------
Tensor sum(const Tensor& x, std::vector<int64_t> axes, bool keepdim = false);
Tensor amax(const Tensor& x, std::vector<int64_t> axes, bool keepdim = false);
Tensor mean(const Tensor& x, std::vector<int64_t> axes, bool keepdim = false);
Tensor prod(const Tensor& x, std::vector<int64_t> axes, bool keepdim = false);
// The first index of the maximum along `axis` (i64; NaN counts as the maximum).
Tensor argmax(const Tensor& x, int64_t axis, bool keepdim = false);

// ---- contraction -----------------------------------------------------------
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- views and data movement -----------------------------------------------
// One entry of `shape` may be -1: inferred from the element count.
Tensor reshape(const Tensor& x, Shape shape);
Tensor permute(const Tensor& x, std::vector<int64_t> perm);
Tensor transpose(const Tensor& x, int64_t a = -2, int64_t b = -1);
Tensor expand(const Tensor& x, Shape shape);
// Python-style: negative start/end count from the end of a concrete axis.
Tensor slice(const Tensor& x, int64_t axis, Dim start, Dim end, int64_t step = 1);
Tensor squeeze(const Tensor& x, std::vector<int64_t> axes);
Tensor unsqueeze(const Tensor& x, std::vector<int64_t> axes);
Tensor concat(const std::vector<Tensor>& xs, int64_t axis);
Tensor gather(const Tensor& table, const Tensor& indices, int64_t axis = 0);
// `base` with each slice of `updates` (gather's result shape) added at its
// index along `axis`, in the indices' order (numpy's np.add.at; floats).
Tensor scatter_add(const Tensor& base, const Tensor& indices, const Tensor& updates, int64_t axis = 0);
Tensor iota(Tracer& t, Dim n, DType dtype = DType::i64);
Tensor iota(const Tensor& like, Dim n, DType dtype = DType::i64);  // in the trace `like` belongs to

// ---- composites ------------------------------------------------------------
Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor rms_norm(const Tensor& x, const Tensor& w, double eps = 1e-5);
Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps = 1e-5);
Tensor silu(const Tensor& x);
// approximate: the tanh form; else the exact one, 0.5x(1 + erf(x/sqrt 2)).
Tensor gelu(const Tensor& x, bool approximate = true);

// ---- special ---------------------------------------------------------------
// Additive mask [q, k]: 0 where key j <= offset + query i, -inf elsewhere.
Tensor causal_mask(const Tensor& offset, Dim q, Dim k, DType dtype = DType::f32);
// The cache with `rows` written at `pos` along `axis`; functional, no mutation.
Tensor kv_write(const Tensor& cache, const Tensor& rows, const Tensor& pos, int64_t axis = 2);
// q [B,Hq,T,D], k/v [B,Hkv,S,D]; Hq a multiple of Hkv (grouped-query).
// `offset` (the query's start position) only when causal.
Tensor flash_attn(const Tensor& q, const Tensor& k, const Tensor& v, double scale);
Tensor flash_attn_causal(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& offset, double scale);

// ---- structured control flow (one graph, no graph break) -------------------
// The functions are traced (twice: once to find the outer tensors they use,
// which become operands); they must not read tensor values.
using StateFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
// Runs `body` while `cond` (a scalar) is nonzero; returns the final state
// (body returns the state's next value, with the same types as `init`).
std::vector<Tensor> while_loop(const std::function<Tensor(const std::vector<Tensor>&)>& cond, const StateFn& body,
                               const std::vector<Tensor>& init);
// then_fn(operands) if pred (a scalar) is nonzero, else else_fn(operands);
// both return the same types.
std::vector<Tensor> cond(const Tensor& pred, const StateFn& then_fn, const StateFn& else_fn, const std::vector<Tensor>& operands);

}  // namespace tj
