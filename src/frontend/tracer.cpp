#include <algorithm>

#include "frontend/emit.h"
#include "ir/constant.h"
#include "ir/text.h"
#include "tensorjit/ndarray.h"
#include "tensorjit/tensor.h"

namespace tj {

const Type& Tensor::type() const {
  if (!t_) throw Error("use of an undefined tensor");
  return t_->graph().type(v_);
}

const Dim& Tensor::dim(int axis) const {
  int r = rank();
  if (axis < -r || axis >= r) throw Error("axis " + std::to_string(axis) + " out of range for " + type().str());
  return shape()[static_cast<size_t>(axis < 0 ? axis + r : axis)];
}

Tensor::Tensor(Tracer* t, ValueId v) : t_(t), v_(v) {
  if (t_) t_->hold(v_, 1);
}

Tensor& Tensor::operator=(const Tensor& o) {
  if (this != &o) {
    if (o.t_) o.t_->hold(o.v_, 1);
    if (t_) t_->hold(v_, -1);
    t_ = o.t_, v_ = o.v_;
  }
  return *this;
}

Tensor& Tensor::operator=(Tensor&& o) noexcept {
  if (this != &o) {
    if (t_) t_->hold(v_, -1);
    t_ = o.t_, v_ = o.v_;
    o.t_ = nullptr;
  }
  return *this;
}

Tensor::~Tensor() {
  if (t_) t_->hold(v_, -1);
}

double Tensor::item(std::source_location where) const {
  if (!t_) throw Error("use of an undefined tensor");
  return t_->read_value(*this, where);
}

void Tracer::hold(ValueId v, int delta) {
  size_t i = static_cast<size_t>(v);
  if (i >= holders_.size()) holders_.resize(std::max(i + 1, holders_.size() * 2), 0);
  holders_[i] += delta;
}

double Tracer::read_value(const Tensor& t, const std::source_location& where) {
  if (!reader_)
    throw Error("item() reads a tensor's value while tracing (" + std::string(where.file_name()) + ":" + std::to_string(where.line()) +
                "): data-dependent control flow needs a graph break (tj::jit) or tj::cond/tj::while_loop");
  return reader_(t, where);
}

Tracer::Tracer(std::string name) : g_(std::make_unique<Graph>(std::move(name))) {}
Tracer::Tracer(std::string name, Tracer* parent) : g_(std::make_unique<Graph>(std::move(name))), parent_(parent) {}
Tracer::~Tracer() = default;

Tensor Tracer::input(std::string name, DType dtype, Shape shape) {
  return {this, g_->add_input(std::move(name), {dtype, std::move(shape)})};
}

Tensor Tracer::param(std::string name, DType dtype, Shape shape) {
  return {this, g_->add_param(std::move(name), {dtype, std::move(shape)})};
}

Tensor Tracer::constant(DType dtype, Shape shape, std::vector<double> data) {
  return {this, g_->add_const({dtype, std::move(shape)}, std::move(data))};
}

Tensor Tracer::constant(const NDArray& values) {
  Type type{values.dtype(), Shape(values.shape().begin(), values.shape().end())};
  // A view is copied: the graph outlives the caller's memory.
  NDArray owned = values.is_view() ? NDArray::copy_of(values.dtype(), values.shape(), values.raw(), values.nbytes()) : values;
  return {this, g_->add_const(std::move(type), ConstValues::adopt(std::move(owned)))};
}

Tensor Tracer::scalar(double value, DType dtype) { return constant(dtype, {}, {value}); }

bool Tracer::is_ancestor(const Tracer* t) const {
  for (const Tracer* p = parent_; p; p = p->parent_)
    if (p == t) return true;
  return false;
}

ValueId Tracer::operand(const Tensor& t, const char* op) {
  if (t.tracer() == this) return t.id();
  if (!t.tracer() || !is_ancestor(t.tracer())) throw Error(std::string(op) + ": operand from another trace (or undefined)");
  auto key = std::make_pair(static_cast<const Tracer*>(t.tracer()), t.id());
  for (const auto& [k, v] : captured_)
    if (k == key) return v;
  const Node& n = t.tracer()->graph().node(t.id());
  if (n.op == Op::constant) {  // copied in, not an input
    ValueId c = g_->copy_const(n);
    captured_.push_back({key, c});
    return c;
  }
  ValueId v = g_->add_input("c" + std::to_string(captures_.size()), t.type());
  captured_.push_back({key, v});
  captures_.push_back(t);
  return v;
}

void Tracer::capture(const std::vector<Tensor>& outer) {
  for (const Tensor& t : outer) (void)operand(t, "capture");
}

namespace {

// The region whose function is running (trace_region), innermost first.
thread_local Tracer* g_region = nullptr;

}  // namespace

// An op goes to the innermost trace among its operands' and the region being
// traced: `b * s` and `s * b` inside a region both trace into it (b, an
// outer tensor, captured), and so does `b * b` (so that each of the
// region's traces captures the same outer values).
Tensor TracerAccess::emit(Tracer& first, Op op, const std::vector<Tensor>& operands, const NamedAttrs& attrs) {
  Tracer* t = &first;
  for (const auto& o : operands) {
    Tracer* u = o.tracer();
    if (u && u != t && u->is_ancestor(t)) t = u;  // u is deeper
  }
  if (g_region && g_region != t && g_region->is_ancestor(t)) t = g_region;
  std::vector<ValueId> ids;
  ids.reserve(operands.size());
  for (const auto& o : operands) ids.push_back(t->operand(o, op_def(op).name));
  return {t, t->g_->add(op, std::move(ids), attrs)};
}

RegionScope::RegionScope(Tracer* t) : outer_(g_region) { g_region = t; }
RegionScope::~RegionScope() { g_region = outer_; }

TracedGraph Tracer::finish(const std::vector<Tensor>& outputs) {
  std::vector<ValueId> ids;
  for (const auto& t : outputs) ids.push_back(operand(t, "output"));
  g_->set_outputs(std::move(ids));
  Graph out = std::move(*g_);
  *g_ = Graph(out.name());
  return TracedGraph(std::move(out));
}

// ---- TracedGraph ---------------------------------------------------------------

TracedGraph::TracedGraph() : g_(std::make_shared<Graph>()) {}
TracedGraph::TracedGraph(Graph g) : g_(std::make_shared<Graph>(std::move(g))) {}
TracedGraph TracedGraph::parse(std::string_view text) { return TracedGraph(parse_graph(text)); }
std::string TracedGraph::name() const { return g_->name(); }
std::string TracedGraph::text() const { return print_graph(*g_); }
const Graph& TracedGraph::graph() const { return *g_; }
TracedGraph::operator Graph() const& { return *g_; }
TracedGraph::operator Graph() && {
  if (g_.use_count() == 1) return std::move(*g_);
  return *g_;
}

namespace {
std::vector<Port> ports(const Graph& g, const std::vector<ValueId>& values, bool outputs) {
  std::vector<Port> p;
  for (size_t i = 0; i < values.size(); ++i)
    p.push_back({outputs ? "out" + std::to_string(i) : g.node(values[i]).name, g.type(values[i])});
  return p;
}
}  // namespace

std::vector<Port> TracedGraph::inputs() const { return ports(*g_, g_->inputs(), false); }
std::vector<Port> TracedGraph::params() const { return ports(*g_, g_->params(), false); }
std::vector<Port> TracedGraph::outputs() const { return ports(*g_, g_->outputs(), true); }

namespace {

Tracer& tracer_of(const Tensor& t) {
  if (!t.tracer()) throw Error("use of an undefined tensor");
  return *t.tracer();
}

Tensor unary(Op op, const Tensor& x) { return emit(tracer_of(x), op, {x}); }
Tensor binary(Op op, const Tensor& a, const Tensor& b) { return emit(tracer_of(a), op, {a, b}); }
Tensor scalar_like(const Tensor& like, double v) { return tracer_of(like).scalar(v, like.dtype()); }

Tensor reduce(Op op, const Tensor& x, std::vector<int64_t> axes, bool keepdim) {
  return emit(tracer_of(x), op, {x}, {{"axes", std::move(axes)}, {"keepdim", keepdim}});
}

}  // namespace

Tensor operator+(const Tensor& a, const Tensor& b) { return binary(Op::add, a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return binary(Op::sub, a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return binary(Op::mul, a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return binary(Op::div, a, b); }
Tensor operator+(const Tensor& a, double b) { return a + scalar_like(a, b); }
Tensor operator-(const Tensor& a, double b) { return a - scalar_like(a, b); }
Tensor operator*(const Tensor& a, double b) { return a * scalar_like(a, b); }
Tensor operator/(const Tensor& a, double b) { return a / scalar_like(a, b); }
Tensor operator+(double a, const Tensor& b) { return scalar_like(b, a) + b; }
Tensor operator-(double a, const Tensor& b) { return scalar_like(b, a) - b; }
Tensor operator*(double a, const Tensor& b) { return scalar_like(b, a) * b; }
Tensor operator/(double a, const Tensor& b) { return scalar_like(b, a) / b; }
Tensor operator-(const Tensor& a) { return unary(Op::neg, a); }

Tensor neg(const Tensor& x) { return unary(Op::neg, x); }
Tensor exp(const Tensor& x) { return unary(Op::exp, x); }
Tensor log(const Tensor& x) { return unary(Op::log, x); }
Tensor tanh(const Tensor& x) { return unary(Op::tanh, x); }
Tensor sqrt(const Tensor& x) { return unary(Op::sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary(Op::rsqrt, x); }
Tensor sin(const Tensor& x) { return unary(Op::sin, x); }
Tensor cos(const Tensor& x) { return unary(Op::cos, x); }
Tensor abs(const Tensor& x) { return unary(Op::abs, x); }
Tensor sigmoid(const Tensor& x) { return unary(Op::sigmoid, x); }
Tensor recip(const Tensor& x) { return unary(Op::recip, x); }
Tensor cast(const Tensor& x, DType to, bool saturate) { return emit(tracer_of(x), Op::cast, {x}, {{"to", to}, {"saturate", saturate}}); }
Tensor erf(const Tensor& x) { return unary(Op::erf, x); }
Tensor floor(const Tensor& x) { return unary(Op::floor, x); }
Tensor ceil(const Tensor& x) { return unary(Op::ceil, x); }
Tensor round(const Tensor& x) { return unary(Op::round, x); }
Tensor sign(const Tensor& x) { return unary(Op::sign, x); }
Tensor log1p(const Tensor& x) { return unary(Op::log1p, x); }
Tensor expm1(const Tensor& x) { return unary(Op::expm1, x); }
Tensor relu(const Tensor& x) { return unary(Op::relu, x); }
Tensor softplus(const Tensor& x) { return unary(Op::softplus, x); }
Tensor leaky_relu(const Tensor& x, double alpha) { return emit(tracer_of(x), Op::leaky_relu, {x}, {{"alpha", alpha}}); }
Tensor hardswish(const Tensor& x) { return unary(Op::hardswish, x); }
Tensor tan(const Tensor& x) { return unary(Op::tan, x); }
Tensor asin(const Tensor& x) { return unary(Op::asin, x); }
Tensor acos(const Tensor& x) { return unary(Op::acos, x); }
Tensor atan(const Tensor& x) { return unary(Op::atan, x); }
Tensor sinh(const Tensor& x) { return unary(Op::sinh, x); }
Tensor cosh(const Tensor& x) { return unary(Op::cosh, x); }
Tensor asinh(const Tensor& x) { return unary(Op::asinh, x); }
Tensor acosh(const Tensor& x) { return unary(Op::acosh, x); }
Tensor atanh(const Tensor& x) { return unary(Op::atanh, x); }
Tensor trunc(const Tensor& x) { return unary(Op::trunc, x); }
Tensor atan2(const Tensor& a, const Tensor& b) { return binary(Op::atan2, a, b); }
Tensor bitwise_and(const Tensor& a, const Tensor& b) { return binary(Op::bitwise_and, a, b); }
Tensor bitwise_or(const Tensor& a, const Tensor& b) { return binary(Op::bitwise_or, a, b); }
Tensor bitwise_xor(const Tensor& a, const Tensor& b) { return binary(Op::bitwise_xor, a, b); }
Tensor bitwise_not(const Tensor& x) { return unary(Op::bitwise_not, x); }
Tensor shift_left(const Tensor& a, const Tensor& b) { return binary(Op::shift_left, a, b); }
Tensor shift_right(const Tensor& a, const Tensor& b) { return binary(Op::shift_right, a, b); }

Tensor maximum(const Tensor& a, const Tensor& b) { return binary(Op::max, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(Op::min, a, b); }
Tensor maximum(const Tensor& a, double b) { return maximum(a, scalar_like(a, b)); }
Tensor maximum(double a, const Tensor& b) { return maximum(scalar_like(b, a), b); }
Tensor minimum(const Tensor& a, double b) { return minimum(a, scalar_like(a, b)); }
Tensor minimum(double a, const Tensor& b) { return minimum(scalar_like(b, a), b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary(Op::pow, a, b); }
// Float powers by the exponents that ATen's and ONNX Runtime's kernels
// multiply out (or take roots for) instead of calling pow: faster, and the
// results those frameworks give. Other exponents, and integers, are pow.
Tensor pow(const Tensor& a, double b) {
  if (is_float(a.dtype())) {
    if (b == 1.0) return a;
    if (b == 2.0) return a * a;
    if (b == 3.0) return a * a * a;
    if (b == 0.5) return sqrt(a);
    if (b == -0.5) return rsqrt(a);
    if (b == -1.0) return recip(a);
    if (b == -2.0) return recip(a * a);
  }
  return pow(a, scalar_like(a, b));
}
Tensor eq(const Tensor& a, const Tensor& b) { return binary(Op::eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(Op::ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(Op::lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(Op::le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(Op::gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(Op::ge, a, b); }
Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) { return emit(tracer_of(c), Op::where, {c, a, b}); }
Tensor where(const Tensor& c, const Tensor& a, double b) { return where(c, a, scalar_like(a, b)); }
Tensor where(const Tensor& c, double a, const Tensor& b) { return where(c, scalar_like(b, a), b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator<(const Tensor& a, double b) { return lt(a, scalar_like(a, b)); }
Tensor operator<=(const Tensor& a, double b) { return le(a, scalar_like(a, b)); }
Tensor operator>(const Tensor& a, double b) { return gt(a, scalar_like(a, b)); }
Tensor operator>=(const Tensor& a, double b) { return ge(a, scalar_like(a, b)); }
Tensor mod(const Tensor& a, const Tensor& b, bool fmod) { return emit(tracer_of(a), Op::mod, {a, b}, {{"fmod", fmod}}); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return binary(Op::logical_and, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return binary(Op::logical_or, a, b); }
Tensor logical_not(const Tensor& x) { return unary(Op::logical_not, x); }
Tensor clip(const Tensor& x, const Tensor& lo, const Tensor& hi) { return emit(tracer_of(x), Op::clip, {x, lo, hi}); }
Tensor clip(const Tensor& x, double lo, double hi) { return clip(x, scalar_like(x, lo), scalar_like(x, hi)); }

Tensor sum(const Tensor& x, std::vector<int64_t> axes, bool keepdim) { return reduce(Op::sum, x, std::move(axes), keepdim); }
Tensor amax(const Tensor& x, std::vector<int64_t> axes, bool keepdim) { return reduce(Op::amax, x, std::move(axes), keepdim); }
Tensor mean(const Tensor& x, std::vector<int64_t> axes, bool keepdim) { return reduce(Op::mean, x, std::move(axes), keepdim); }
Tensor prod(const Tensor& x, std::vector<int64_t> axes, bool keepdim) { return reduce(Op::prod, x, std::move(axes), keepdim); }
Tensor argmax(const Tensor& x, int64_t axis, bool keepdim) {
  return emit(tracer_of(x), Op::argmax, {x}, {{"axis", axis}, {"keepdim", keepdim}});
}

Tensor matmul(const Tensor& a, const Tensor& b) { return binary(Op::matmul, a, b); }

Tensor reshape(const Tensor& x, Shape shape) {
  int infer_at = -1;
  Dim known(1);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == Dim(-1)) {
      if (infer_at >= 0) throw ShapeError("reshape(" + x.type().str() + "): more than one -1 in " + shape_str(shape));
      infer_at = static_cast<int>(i);
    } else {
      known = known * shape[i];
    }
  }
  if (infer_at >= 0) {
    auto d = numel(x.shape()).div_exact(known);
    if (!d) throw ShapeError("reshape(" + x.type().str() + "): cannot infer -1 in " + shape_str(shape));
    shape[static_cast<size_t>(infer_at)] = *d;
  }
  return emit(tracer_of(x), Op::reshape, {x}, {{"shape", std::move(shape)}});
}

Tensor permute(const Tensor& x, std::vector<int64_t> perm) {
  return emit(tracer_of(x), Op::permute, {x}, {{"perm", std::move(perm)}});
}

Tensor transpose(const Tensor& x, int64_t a, int64_t b) {
  int64_t r = x.rank();
  if (a < -r || a >= r || b < -r || b >= r)
    throw ShapeError("transpose(" + x.type().str() + "): axes " + std::to_string(a) + ", " + std::to_string(b) + " out of range");
  if (a < 0) a += r;
  if (b < 0) b += r;
  std::vector<int64_t> perm(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) perm[static_cast<size_t>(i)] = i;
  std::swap(perm[static_cast<size_t>(a)], perm[static_cast<size_t>(b)]);
  return permute(x, std::move(perm));
}

Tensor expand(const Tensor& x, Shape shape) { return emit(tracer_of(x), Op::expand, {x}, {{"shape", std::move(shape)}}); }

Tensor slice(const Tensor& x, int64_t axis, Dim start, Dim end, int64_t step) {
  int64_t r = x.rank();
  if (axis < -r || axis >= r) throw ShapeError("slice(" + x.type().str() + "): axis " + std::to_string(axis) + " out of range");
  const Dim& d = x.dim(static_cast<int>(axis));
  // Python-style negative indices and clamping, where the axis is concrete.
  auto normalize = [&](Dim v) {
    auto c = v.as_const();
    if (c && *c < 0) v = d + v;
    if (auto dc = d.as_const(); dc && v.as_const()) v = Dim(std::clamp<int64_t>(*v.as_const(), 0, *dc));
    return v;
  };
  return emit(tracer_of(x), Op::slice, {x},
                           {{"axis", axis}, {"start", normalize(std::move(start))}, {"end", normalize(std::move(end))}, {"step", step}});
}

Tensor squeeze(const Tensor& x, std::vector<int64_t> axes) { return emit(tracer_of(x), Op::squeeze, {x}, {{"axes", std::move(axes)}}); }
Tensor unsqueeze(const Tensor& x, std::vector<int64_t> axes) {
  return emit(tracer_of(x), Op::unsqueeze, {x}, {{"axes", std::move(axes)}});
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty()) throw ShapeError("concat of no tensors");
  return emit(tracer_of(xs[0]), Op::concat, xs, {{"axis", axis}});
}

Tensor gather(const Tensor& table, const Tensor& indices, int64_t axis) {
  return emit(tracer_of(table), Op::gather, {table, indices}, {{"axis", axis}});
}

Tensor scatter_add(const Tensor& base, const Tensor& indices, const Tensor& updates, int64_t axis) {
  return emit(tracer_of(base), Op::scatter_add, {base, indices, updates}, {{"axis", axis}});
}

Tensor iota(Tracer& t, Dim n, DType dtype) { return emit(t, Op::iota, {}, {{"n", std::move(n)}, {"dtype", dtype}}); }
Tensor iota(const Tensor& like, Dim n, DType dtype) { return iota(tracer_of(like), std::move(n), dtype); }

// ---- methods ---------------------------------------------------------------------

Tensor Tensor::reshape(Shape shape) const { return tj::reshape(*this, std::move(shape)); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return tj::transpose(*this, a, b); }
Tensor Tensor::slice(int64_t axis, Dim start, Dim end, int64_t step) const { return tj::slice(*this, axis, std::move(start), std::move(end), step); }

Tensor Tensor::index(const std::vector<Index>& idx) const {
  int r = rank();
  if (static_cast<int>(idx.size()) > r)
    throw ShapeError("index of " + type().str() + ": " + std::to_string(idx.size()) + " indices for rank " + std::to_string(r));
  Tensor x = *this;
  std::vector<int64_t> drop;
  for (size_t a = 0; a < idx.size(); ++a) {
    const Dim& d = shape()[a];
    const int64_t axis = static_cast<int64_t>(a);
    if (const auto* i = std::get_if<int64_t>(&idx[a])) {
      int64_t p = *i;
      if (p < 0) {
        auto c = d.as_const();
        if (!c) throw ShapeError("index of " + type().str() + ": a negative position on symbolic axis " + std::to_string(a));
        p += *c;
      }
      if (auto c = d.as_const(); p < 0 || (c && p >= *c))
        throw ShapeError("index " + std::to_string(*i) + " out of range for axis " + std::to_string(a) + " of " + type().str());
      x = tj::slice(x, axis, p, p + 1);
      drop.push_back(axis);
      continue;
    }
    const Range& g = std::get<Range>(idx[a]);
    bool whole = g.start == Dim(0) && !g.end && g.step == 1;
    if (!whole) x = tj::slice(x, axis, g.start, g.end ? *g.end : d, g.step);
  }
  return drop.empty() ? x : squeeze(x, drop);
}

Tensor softmax(const Tensor& x, int64_t axis) { return emit(tracer_of(x), Op::softmax, {x}, {{"axis", axis}}); }
Tensor rms_norm(const Tensor& x, const Tensor& w, double eps) { return emit(tracer_of(x), Op::rms_norm, {x, w}, {{"eps", eps}}); }
Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  return emit(tracer_of(x), Op::layer_norm, {x, w, b}, {{"eps", eps}});
}
Tensor silu(const Tensor& x) { return unary(Op::silu, x); }
Tensor gelu(const Tensor& x, bool approximate) { return emit(tracer_of(x), Op::gelu, {x}, {{"approximate", approximate}}); }

Tensor causal_mask(const Tensor& offset, Dim q, Dim k, DType dtype) {
  return emit(tracer_of(offset), Op::causal_mask, {offset}, {{"q", std::move(q)}, {"k", std::move(k)}, {"dtype", dtype}});
}

Tensor kv_write(const Tensor& cache, const Tensor& rows, const Tensor& pos, int64_t axis) {
  return emit(tracer_of(cache), Op::kv_write, {cache, rows, pos}, {{"axis", axis}});
}

Tensor flash_attn(const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  return emit(tracer_of(q), Op::flash_attn, {q, k, v}, {{"scale", scale}});
}

Tensor flash_attn_causal(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& offset, double scale) {
  return emit(tracer_of(q), Op::flash_attn, {q, k, v, offset}, {{"scale", scale}, {"causal", true}});
}

// ---- structured control flow -------------------------------------------------

namespace {

// A region over `args` (inputs s0.., then the captures c0..), traced from fn.
struct RegionTrace {
  Region graph;
  std::vector<Tensor> captures;  // outer tensors, beyond the ones passed in
};

RegionTrace trace_region(Tracer& outer, const std::string& name, const std::vector<Tensor>& args, const std::vector<Tensor>& known,
                         const StateFn& fn) {
  Tracer t(name, &outer);
  std::vector<Tensor> params;
  for (size_t i = 0; i < args.size(); ++i) params.push_back(t.input("s" + std::to_string(i), args[i].dtype(), args[i].shape()));
  t.capture(known);
  std::vector<Tensor> out;
  {
    RegionScope scope(&t);
    out = fn(params);
  }
  Graph g = t.finish(out);  // an outer tensor returned as is is captured here too
  return {std::make_shared<const Graph>(std::move(g)), t.captures()};
}

// Traces every region once to learn the outer tensors they use, then again
// with all of them as inputs in one order, so the regions share a signature.
std::vector<Region> trace_regions(Tracer& outer, const std::vector<std::string>& names, const std::vector<Tensor>& args,
                                  const std::vector<StateFn>& fns, std::vector<Tensor>* captures) {
  for (size_t i = 0; i < fns.size(); ++i) {
    auto more = trace_region(outer, names[i], args, *captures, fns[i]).captures;
    captures->assign(more.begin(), more.end());
  }
  std::vector<Region> r;
  for (size_t i = 0; i < fns.size(); ++i) r.push_back(trace_region(outer, names[i], args, *captures, fns[i]).graph);
  return r;
}

std::vector<Tensor> results(Tracer& t, const Tensor& op, int64_t n) {
  std::vector<Tensor> r{op};
  for (int64_t i = 1; i < n; ++i) r.push_back(emit(t, Op::result, {op}, {{"index", i}}));
  return r;
}

}  // namespace

std::vector<Tensor> while_loop(const std::function<Tensor(const std::vector<Tensor>&)>& cond, const StateFn& body,
                               const std::vector<Tensor>& init) {
  if (init.empty()) throw Error("while_loop: no state");
  Tracer& t = tracer_of(init[0]);
  std::string base = t.graph().name() + ".while" + std::to_string(t.graph().size());
  std::vector<Tensor> caps;
  StateFn c = [&cond](const std::vector<Tensor>& s) { return std::vector<Tensor>{cond(s)}; };
  auto regions = trace_regions(t, {base + ".cond", base + ".body"}, init, {c, body}, &caps);
  std::vector<Tensor> operands = init;
  operands.insert(operands.end(), caps.begin(), caps.end());
  // The regions also take the captures: pass them after the carried state.
  Tensor op = emit(t, Op::while_loop, operands,
                     {{"carried", static_cast<int64_t>(init.size())}, {"cond", regions[0]}, {"body", regions[1]}});
  return results(t, op, static_cast<int64_t>(init.size()));
}

std::vector<Tensor> cond(const Tensor& pred, const StateFn& then_fn, const StateFn& else_fn, const std::vector<Tensor>& operands) {
  Tracer& t = tracer_of(pred);
  std::string base = t.graph().name() + ".cond" + std::to_string(t.graph().size());
  std::vector<Tensor> caps;
  auto regions = trace_regions(t, {base + ".then", base + ".else"}, operands, {then_fn, else_fn}, &caps);
  std::vector<Tensor> all{pred};
  all.insert(all.end(), operands.begin(), operands.end());
  all.insert(all.end(), caps.begin(), caps.end());
  Tensor op = emit(t, Op::cond, all, {{"then", regions[0]}, {"else", regions[1]}});
  return results(t, op, static_cast<int64_t>(regions[0]->outputs().size()));
}

}  // namespace tj
