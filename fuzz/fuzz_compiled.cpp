// fuzz_compiled: the compiled path, differential against the interpreter.
//
// The bytes drive a generator of tiny graphs (so that libFuzzer's mutations
// change ops, shapes, attributes and values, not a seed): f32 or f64 as the
// graph's float type, i32/i64/bool values, casts between every pair, integer
// div, comparisons, where, reductions, views, concat, gather, matmul,
// composites, and edge constants (±0, nan, ±inf, ±1e30, INT32/INT64 min and
// max, -1). Each graph runs on the interpreter (compute = its float type) and
// through tj::Executable::compile + run on the same inputs:
//   - integer and bool outputs must be equal bit for bit;
//   - float outputs within a relative tolerance (1e-4 where f32 is involved,
//     1e-9 for f64) with an absolute floor scaled by the inputs' magnitude;
//     NaN matches only NaN, an infinity only the same infinity;
//   - both throwing tj::Error is fine (integer division by zero, a gather
//     index out of range); one throwing and not the other is a finding.
// A finding prints the graph, the inputs and both outputs, then aborts.
//
// Discontinuous ops (float -> int/bool casts, float comparisons) only read
// floats that both sides compute exactly (inputs, constants, and what moves,
// selects or compares them), so that rounding differences within tolerance
// cannot flip a result.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "ir/graph.h"
#include "ir/text.h"
#include "passes/passes.h"
#include "reference/interpreter.h"
#include "tensorjit/error.h"

namespace {

using tj::DType;
using tj::Op;
using tj::ValueId;

constexpr int64_t kMaxElements = 256;  // per value kept for later steps
constexpr int kMaxSteps = 10;

const double kEdgeValues[] = {
    0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 3.0, -7.0,
    std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
    -std::numeric_limits<double>::infinity(), 1e30, -1e30,
    -2147483648.0, 2147483647.0, -9223372036854775808.0,
    9223372036854774784.0,  // the largest double below 2^63: INT64_MAX as near as a double gets
    65536.0, 1e-30, 100.0,
};

struct Value {
  ValueId id;
  bool exact;  // both sides compute it bit for bit (see the file comment)
};

class Generator {
 public:
  explicit Generator(FuzzedDataProvider& in) : in_(in) {}

  tj::Graph build() {
    float_ = in_.ConsumeBool() ? DType::f64 : DType::f32;
    int inputs = in_.ConsumeIntegralInRange(1, 3);
    for (int i = 0; i < inputs; ++i) {
      DType t = pick_dtype();
      tj::Shape s = pick_shape();
      ValueId v = g_.add_input("x" + std::to_string(i), {t, s});
      input_types_.push_back({t, s});
      pool_.push_back({v, true});
    }
    int steps = in_.ConsumeIntegralInRange(1, kMaxSteps);
    for (int i = 0; i < steps && in_.remaining_bytes() > 0; ++i) {
      try {
        step();
      } catch (const tj::Error&) {
        // The op did not fit its operands (inference said so): skip the step.
      }
    }
    std::vector<ValueId> outs = {pool_.back().id};
    if (pool_.size() > 2 && in_.ConsumeBool()) outs.push_back(pool_[pool_.size() - 2].id);
    g_.set_outputs(outs);
    // Dead nodes go: the interpreter runs every node, so an error in one
    // (a gather index out of range) fails it, while compiled code never
    // computes them.
    tj::dce(g_, {});
    return std::move(g_);
  }

  // Input data, from the bytes left after the graph.
  tj::Bindings inputs() {
    tj::Bindings b;
    for (size_t i = 0; i < input_types_.size(); ++i) {
      const tj::Type& t = input_types_[i];
      std::vector<int64_t> shape;
      for (const tj::Dim& d : t.shape) shape.push_back(d.value());
      tj::NDArray a(t.dtype, shape);
      for (int64_t k = 0; k < a.numel(); ++k) a.set(k, tj::round_to_dtype(pick_value(t.dtype), t.dtype));
      b.emplace("x" + std::to_string(i), std::move(a));
    }
    return b;
  }

  DType float_type() const { return float_; }

 private:
  DType pick_dtype() {
    static const DType any[] = {DType::f32, DType::f64, DType::i32, DType::i64, DType::boolean};
    // The graph's float type most of the time.
    uint8_t k = in_.ConsumeIntegralInRange<uint8_t>(0, 7);
    return k < 3 ? float_ : any[k - 3];
  }
  DType pick_any_dtype() {
    static const DType any[] = {DType::f32, DType::f64, DType::i32, DType::i64, DType::boolean};
    return any[in_.ConsumeIntegralInRange(0, 4)];
  }
  int64_t pick_dim() {
    int64_t d = in_.ConsumeIntegralInRange<int64_t>(0, 4);
    return d;
  }
  tj::Shape pick_shape() {
    tj::Shape s;
    int r = in_.ConsumeIntegralInRange(0, 3);
    for (int i = 0; i < r; ++i) s.push_back(pick_dim());
    return s;
  }
  double pick_value(DType t) {
    uint8_t k = in_.ConsumeIntegral<uint8_t>();
    if (t == DType::boolean) return k & 1;
    if (k < (is_float(t) ? 128 : 192)) return static_cast<double>(static_cast<int>(k % 9) - 4) * (is_float(t) && (k & 16) ? 0.25 : 1.0);
    return kEdgeValues[k % std::size(kEdgeValues)];
  }
  Value pick() { return pool_[in_.ConsumeIntegralInRange<size_t>(0, pool_.size() - 1)]; }
  Value recent() {
    size_t back = in_.ConsumeIntegralInRange<size_t>(0, std::min<size_t>(2, pool_.size() - 1));
    return pool_[pool_.size() - 1 - back];
  }
  const tj::Type& type(Value v) const { return g_.type(v.id); }
  // A value of dtype t (preferring the pool), broadcastable with `like`.
  Value partner(Value like, DType t) {
    for (int tries = 0; tries < 4; ++tries) {
      Value p = pick();
      if (type(p).dtype == t && (type(p).shape == type(like).shape || type(p).rank() == 0)) return p;
    }
    return constant(t, in_.ConsumeBool() ? tj::Shape{} : type(like).shape);
  }
  Value constant(DType t, tj::Shape s) {
    int64_t n = *tj::numel_const(s);
    std::vector<double> data;
    if (in_.ConsumeBool() || n == 0) data.push_back(pick_value(t));
    else
      for (int64_t i = 0; i < n; ++i) data.push_back(pick_value(t));
    return {g_.add_const({t, s}, data), true};
  }
  Value as_float_exact_or_none(Value v) {
    // Discontinuous ops read only exact floats; swap in an exact value.
    if (!is_float(type(v).dtype) || v.exact) return v;
    for (int tries = 0; tries < 4; ++tries) {
      Value p = pick();
      if (p.exact) return p;
    }
    return pool_.front();  // an input: exact
  }
  void push(Value v) {
    auto n = tj::numel_const(type(v).shape);
    if (n && *n <= kMaxElements && type(v).rank() <= 4) pool_.push_back(v);
  }
  std::vector<int64_t> pick_axes(int rank) {
    std::vector<int64_t> axes;
    for (int i = 0; i < rank; ++i)
      if (in_.ConsumeBool()) axes.push_back(i);
    if (axes.empty() && rank > 0) axes.push_back(in_.ConsumeIntegralInRange(0, rank - 1));
    return axes;
  }

  void step() {
    Value x = recent();
    const tj::Type tx = type(x);
    int r = tx.rank();
    bool fl = is_float(tx.dtype);
    switch (in_.ConsumeIntegralInRange(0, 16)) {
      case 0: {  // unary
        static const Op float_ops[] = {Op::neg,   Op::exp,   Op::log,   Op::tanh,  Op::sqrt,  Op::rsqrt,    Op::sin,       Op::cos,
                                       Op::abs,   Op::sigmoid, Op::recip, Op::erf, Op::floor, Op::ceil,   Op::round,     Op::sign,
                                       Op::log1p, Op::expm1, Op::relu,  Op::softplus, Op::leaky_relu, Op::hardswish};
        static const Op int_ops[] = {Op::neg, Op::abs, Op::sign, Op::relu};
        Op op = fl ? float_ops[in_.ConsumeIntegralInRange<size_t>(0, std::size(float_ops) - 1)]
                   : int_ops[in_.ConsumeIntegralInRange<size_t>(0, std::size(int_ops) - 1)];
        static const Op exact_ops[] = {Op::neg, Op::abs, Op::floor, Op::ceil, Op::round, Op::sign, Op::relu};
        bool exact = x.exact && std::find(std::begin(exact_ops), std::end(exact_ops), op) != std::end(exact_ops);
        push({g_.add(op, {x.id}), exact});
        break;
      }
      case 1: {  // cast between any pair
        DType to = pick_any_dtype();
        if (!is_float(to)) x = as_float_exact_or_none(x);
        DType from = type(x).dtype;
        bool exact = x.exact && !(from == DType::f64 && to == DType::f32);
        push({g_.add(Op::cast, {x.id}, {{"to", to}}), exact});
        break;
      }
      case 2:
      case 3: {  // binary arithmetic
        static const Op ops[] = {Op::add, Op::sub, Op::mul, Op::div, Op::max, Op::min, Op::mod, Op::pow};
        Op op = ops[in_.ConsumeIntegralInRange<size_t>(0, std::size(ops) - (fl ? 1 : 2))];
        Value y = partner(x, tx.dtype);
        bool swap = in_.ConsumeBool();
        bool fmod = op == Op::mod && in_.ConsumeBool();
        // C's fmod is exact; the floor remainder adds the divisor, which rounds.
        bool exact = !fl || (x.exact && y.exact && (op == Op::max || op == Op::min || fmod));
        tj::NamedAttrs attrs;
        if (op == Op::mod) attrs.push_back({"fmod", fmod});
        push({g_.add(op, swap ? std::vector{y.id, x.id} : std::vector{x.id, y.id}, attrs), exact});
        break;
      }
      case 4: {  // comparison
        static const Op ops[] = {Op::eq, Op::ne, Op::lt, Op::le, Op::gt, Op::ge};
        Op op = ops[in_.ConsumeIntegralInRange(0, 5)];
        x = as_float_exact_or_none(x);
        Value y = partner(x, type(x).dtype);
        if (is_float(type(y).dtype) && !y.exact) y = constant(type(x).dtype, {});
        Value c{g_.add(op, {x.id, y.id}), true};
        switch (in_.ConsumeIntegralInRange(0, 3)) {  // and logic on it
          case 1: c = {g_.add(Op::logical_not, {c.id}), true}; break;
          case 2: c = {g_.add(Op::logical_and, {c.id, partner(c, DType::boolean).id}), true}; break;
          case 3: c = {g_.add(Op::logical_or, {c.id, partner(c, DType::boolean).id}), true}; break;
          default: break;
        }
        push(c);
        break;
      }
      case 5: {  // where, or clip
        Value y = partner(x, tx.dtype);
        if (tx.dtype != DType::boolean && in_.ConsumeBool()) {
          Value z = partner(x, tx.dtype);
          push({g_.add(Op::clip, {x.id, y.id, z.id}), x.exact && y.exact && z.exact});
          break;
        }
        Value c = partner(x, DType::boolean);
        push({g_.add(Op::where, {c.id, x.id, y.id}), x.exact && y.exact});
        break;
      }
      case 6: {  // reduction
        if (r > 0 && x.exact && in_.ConsumeIntegralInRange(0, 3) == 0) {  // argmax: an inexact x may tie differently
          push({g_.add(Op::argmax, {x.id}, {{"axis", int64_t{in_.ConsumeIntegralInRange(0, r - 1)}}, {"keepdim", in_.ConsumeBool()}}), true});
          break;
        }
        static const Op ops[] = {Op::sum, Op::amax, Op::mean};
        Op op = ops[in_.ConsumeIntegralInRange(0, 2)];
        bool exact = op == Op::amax ? x.exact : !fl;
        push({g_.add(op, {x.id}, {{"axes", pick_axes(r)}, {"keepdim", in_.ConsumeBool()}}), exact});
        break;
      }
      case 7: {  // reshape: flatten, split in two, or add unit dims
        int64_t n = *tj::numel_const(tx.shape);
        tj::Shape s;
        switch (in_.ConsumeIntegralInRange(0, 2)) {
          case 0: s = {n}; break;
          case 1: {
            int64_t a = in_.ConsumeIntegralInRange<int64_t>(1, 4);
            if (n % a == 0) s = {a, n / a};
            else s = {n, 1};
            break;
          }
          default: s = tx.shape; s.insert(s.begin(), 1); break;
        }
        push({g_.add(Op::reshape, {x.id}, {{"shape", s}}), x.exact});
        break;
      }
      case 8: {  // permute
        std::vector<int64_t> perm;
        for (int i = 0; i < r; ++i) perm.push_back(i);
        for (int i = r - 1; i > 0; --i) std::swap(perm[static_cast<size_t>(i)], perm[in_.ConsumeIntegralInRange<size_t>(0, static_cast<size_t>(i))]);
        push({g_.add(Op::permute, {x.id}, {{"perm", perm}}), x.exact});
        break;
      }
      case 9: {  // slice
        if (r == 0) return;
        int64_t axis = in_.ConsumeIntegralInRange(0, r - 1);
        int64_t d = tx.shape[static_cast<size_t>(axis)].value();
        int64_t start = in_.ConsumeIntegralInRange<int64_t>(0, d);
        int64_t end = in_.ConsumeIntegralInRange<int64_t>(start, d);
        int64_t step = in_.ConsumeIntegralInRange<int64_t>(1, 3);
        push({g_.add(Op::slice, {x.id}, {{"axis", axis}, {"start", start}, {"end", end}, {"step", step}}), x.exact});
        break;
      }
      case 10: {  // expand: grow unit dims, maybe add a leading one
        tj::Shape s = tx.shape;
        for (tj::Dim& d : s)
          if (d == tj::Dim(1)) d = pick_dim();
        if (in_.ConsumeBool()) s.insert(s.begin(), pick_dim());
        push({g_.add(Op::expand, {x.id}, {{"shape", s}}), x.exact});
        break;
      }
      case 11: {  // concat
        if (r == 0) return;
        Value y = partner(x, tx.dtype);
        if (type(y).shape != tx.shape) y = x;
        push({g_.add(Op::concat, {x.id, y.id}, {{"axis", int64_t{in_.ConsumeIntegralInRange(0, r - 1)}}}), x.exact && y.exact});
        break;
      }
      case 12: {  // gather: indices from the pool or a constant, mostly in range
        if (r == 0) return;
        int64_t axis = in_.ConsumeIntegralInRange(0, r - 1);
        int64_t d = tx.shape[static_cast<size_t>(axis)].value();
        Value idx = pick();
        if (!is_int(type(idx).dtype)) {
          DType it = in_.ConsumeBool() ? DType::i32 : DType::i64;
          tj::Shape s = in_.ConsumeBool() ? tj::Shape{} : tj::Shape{in_.ConsumeIntegralInRange<int64_t>(1, 3)};
          std::vector<double> data;
          for (int64_t i = 0; i < std::max<int64_t>(1, s.empty() ? 1 : s[0].value()); ++i)
            data.push_back(static_cast<double>(in_.ConsumeIntegralInRange<int64_t>(-d - 1, d)));
          idx = {g_.add_const({it, s}, data), true};
        }
        push({g_.add(Op::gather, {x.id, idx.id}, {{"axis", axis}}), x.exact});
        break;
      }
      case 13: {  // squeeze / unsqueeze
        if (in_.ConsumeBool()) {
          push({g_.add(Op::unsqueeze, {x.id}, {{"axes", std::vector<int64_t>{in_.ConsumeIntegralInRange(0, r)}}}), x.exact});
        } else {
          std::vector<int64_t> axes;
          for (int i = 0; i < r; ++i)
            if (tx.shape[static_cast<size_t>(i)] == tj::Dim(1)) axes.push_back(i);
          if (axes.empty()) return;
          push({g_.add(Op::squeeze, {x.id}, {{"axes", axes}}), x.exact});
        }
        break;
      }
      case 14: {  // matmul with a constant or a pool value
        if (!fl || r < 1) return;
        if (r == 1) x = {g_.add(Op::reshape, {x.id}, {{"shape", tj::Shape{1, tx.shape[0]}}}), x.exact};
        tj::Dim k = type(x).shape.back();
        Value w = constant(tx.dtype, {k, pick_dim()});
        push({g_.add(Op::matmul, {x.id, w.id}), false});
        break;
      }
      case 15: {  // composites
        if (!fl || r == 0) return;
        switch (in_.ConsumeIntegralInRange(0, 4)) {
          case 0: push({g_.add(Op::softmax, {x.id}, {{"axis", int64_t{in_.ConsumeIntegralInRange(0, r - 1)}}}), false}); break;
          case 1: push({g_.add(Op::silu, {x.id}), false}); break;
          case 2: push({g_.add(Op::gelu, {x.id}, {{"approximate", in_.ConsumeBool()}}), false}); break;
          case 3: push({g_.add(Op::rms_norm, {x.id, constant(tx.dtype, {tx.shape.back()}).id}), false}); break;
          default:
            push({g_.add(Op::layer_norm, {x.id, constant(tx.dtype, {tx.shape.back()}).id, constant(tx.dtype, {tx.shape.back()}).id}),
                  false});
            break;
        }
        break;
      }
      default: {  // a constant or an iota joins the pool
        if (in_.ConsumeBool()) push(constant(pick_any_dtype(), pick_shape()));
        else push({g_.add(Op::iota, {}, {{"n", tj::Dim(pick_dim())}, {"dtype", in_.ConsumeBool() ? DType::i32 : DType::i64}}), true});
        break;
      }
    }
  }

  FuzzedDataProvider& in_;
  tj::Graph g_{"fuzz"};
  DType float_ = DType::f32;
  std::vector<tj::Type> input_types_;
  std::vector<Value> pool_;
};

std::string array_str(const tj::NDArray& a) {
  std::string s = a.type_str() + " {";
  for (int64_t i = 0; i < a.numel(); ++i) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%s%.17g", i ? ", " : "", a.get(i));
    s += buf;
  }
  return s + "}";
}

std::string inputs_str(const tj::Bindings& b) {
  std::string s;
  for (const auto& [name, a] : b) s += "  " + name + " = " + array_str(a) + "\n";
  return s;
}

[[noreturn]] void finding(const std::string& what, const tj::Graph& g, const tj::Bindings& inputs, const std::string& detail) {
  std::fprintf(stderr, "fuzz_compiled: %s\n--- graph\n%s--- inputs\n%s--- %s\n", what.c_str(), tj::print_graph(g).c_str(),
               inputs_str(inputs).c_str(), detail.c_str());
  std::abort();
}

struct Outcome {
  std::optional<std::vector<tj::NDArray>> outputs;
  std::string error;  // when outputs is empty
};

std::string outcome_str(const char* who, const Outcome& o) {
  std::string s = std::string(who) + ": ";
  if (!o.outputs) return s + "tj::Error: " + o.error + "\n";
  s += "\n";
  for (const tj::NDArray& a : *o.outputs) s += "  " + array_str(a) + "\n";
  return s;
}

bool close(double a, double b, double rtol, double atol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= atol + rtol * std::max(std::fabs(a), std::fabs(b));
}

// The largest finite magnitude among the inputs and constants: the scale of
// the absolute error that cancellation can leave.
double magnitude(const tj::Graph& g, const tj::Bindings& inputs) {
  double m = 1;
  auto see = [&](double v) {
    if (std::isfinite(v)) m = std::max(m, std::fabs(v));
  };
  for (const auto& [name, a] : inputs)
    for (double v : a.to_vector()) see(v);
  for (const tj::Node& n : g.nodes())
    if (n.op == Op::constant)
      for (size_t i = 0; i < n.const_data()->size(); ++i) see((*n.const_data())[i]);
  return m;
}

void compare(const tj::Graph& g, tj::Bindings& inputs, DType compute) {
  Outcome want, got;
  try {
    want.outputs = tj::interpret(g, inputs, {compute});
  } catch (const tj::Error& e) {
    want.error = e.what();
  }
  std::optional<tj::Graph> optimized;
  try {
    tj::Bindings copy = inputs;
    tj::Executable exe = tj::compile(g, {});
    optimized = exe.optimized();
    got.outputs = exe.run(copy);
  } catch (const tj::Error& e) {
    got.error = e.what();
  }
  // Errors are raised for values the outputs need (docs/ir.md): passes may
  // remove a computation whose value no output uses (where(false, gather(..), b)),
  // and the error it would raise with it. Then the optimized graph,
  // interpreted, is what compiled code must match.
  if (!want.outputs && got.outputs && optimized) {
    try {
      want.outputs = tj::interpret(*optimized, inputs, {compute});
      want.error.clear();
    } catch (const tj::Error&) {
    }
  }
  std::string both = outcome_str("interpreter", want) + outcome_str("compiled", got);
  if (!want.outputs && !got.outputs) return;  // both refused: fine
  if (!want.outputs || !got.outputs) finding("only one side threw", g, inputs, both);
  if (want.outputs->size() != got.outputs->size()) finding("output counts differ", g, inputs, both);
  bool f32 = compute == DType::f32;
  for (const tj::Node& n : g.nodes()) f32 = f32 || n.type.dtype == DType::f32;
  double rtol = f32 ? 1e-4 : 1e-9;
  double scale = magnitude(g, inputs);
  double atol = rtol * scale;
  // Generated code may contract a*b + c into one fused multiply-add
  // (docs/codegen.md): where a product overflows, one side can get NaN and
  // the other an infinity. Non-finite results are not compared in graphs
  // whose inputs reach 1e15.
  bool overflow_prone = scale >= 1e15;
  for (size_t i = 0; i < want.outputs->size(); ++i) {
    const tj::NDArray& w = (*want.outputs)[i];
    const tj::NDArray& c = (*got.outputs)[i];
    DType t = g.type(g.outputs()[i]).dtype;
    if (w.shape() != c.shape() || w.numel() != c.numel()) finding("output " + std::to_string(i) + ": shapes differ", g, inputs, both);
    for (int64_t k = 0; k < w.numel(); ++k) {
      // The interpreter's value in the output's type: computed in f64, an
      // f32 output past FLT_MAX is an infinity in f32 (pow(100, 100)).
      double a = t == DType::f32 ? static_cast<double>(static_cast<float>(w.get(k))) : w.get(k), b = c.get(k);
      bool ok = is_float(t) ? close(a, b, rtol, atol) || (overflow_prone && !(std::isfinite(a) && std::isfinite(b))) : a == b;
      if (!ok)
        finding("output " + std::to_string(i) + " element " + std::to_string(k) + ": " + std::to_string(a) + " vs " + std::to_string(b),
                g, inputs, both);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return -1;
  FuzzedDataProvider in(data, size);
  Generator gen(in);
  tj::Graph g = gen.build();
  tj::Bindings inputs = gen.inputs();
  static const bool verbose = [] {
    const char* e = std::getenv("TJ_FUZZ_VERBOSE");
    return e && *e == '1';
  }();
  if (verbose) std::fprintf(stderr, "--- graph\n%s--- inputs\n%s", tj::print_graph(g).c_str(), inputs_str(inputs).c_str());
  try {
    compare(g, inputs, gen.float_type());
  } catch (const tj::Error& e) {
    // Outside interpret/compile/run: the harness's own doing.
    finding(std::string("unexpected tj::Error: ") + e.what(), g, inputs, "");
  }
  return 0;
}
