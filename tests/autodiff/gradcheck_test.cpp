// vjp (src/autodiff/vjp.h) against central finite differences in f64, for
// every op with a derivative rule: random inputs, shapes that broadcast,
// symbolic dims; and the joint graph's text for ReLU, whose backward reads
// only a comparison of its input.
#include <gtest/gtest.h>


#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>

#include "autodiff/vjp.h"
#include "compiler/compile.h"
#include "ir/text.h"
#include "models/llama.h"
#include "passes/pipeline.h"
#include "reference/interpreter.h"
#include "reference/random_inputs.h"
#include "support/scratch.h"
#include "tensorjit/error.h"
#include "tensorjit/tensor.h"

namespace tj {
namespace {

using Build = std::function<void(Graph&)>;

// phi(inputs) = sum over outputs k of <out_k, r_k> (r_k the cotangents):
// its finite differences against the joint graph's gradients, in f64, at up
// to 24 elements of each floating input. Inputs whose names start with "p"
// are positive (|x| + 0.5).
void gradcheck_graph(const Graph& g, VjpSpec spec, const SymEnv& sizes = {}, double tol = 1e-6) {
  if (spec.wrt.empty()) {
    for (ValueId v : g.inputs())
      if (is_float(g.type(v).dtype)) spec.wrt.push_back(g.node(v).name);
    for (ValueId v : g.params())
      if (is_float(g.type(v).dtype)) spec.wrt.push_back(g.node(v).name);
  }
  const std::vector<std::string> wrt = spec.wrt;
  Vjp r = vjp(g, spec);

  RandomInputOptions ro;
  ro.seed = 7;
  ro.sizes = sizes;
  Bindings in = random_inputs(r.joint, ro);
  for (auto& [name, a] : in)
    if (name[0] == 'p' && is_float(a.dtype()))
      for (int64_t i = 0; i < a.numel(); ++i) a.set(i, std::abs(a.get(i)) + 0.5);
  Bindings fwd_in;
  for (ValueId v : g.inputs()) fwd_in[g.node(v).name] = in.at(g.node(v).name);
  for (ValueId v : g.params()) fwd_in[g.node(v).name] = in.at(g.node(v).name);

  InterpretOptions f64;
  f64.compute = DType::f64;
  std::vector<NDArray> joint = interpret(r.joint, in, f64);
  ASSERT_EQ(joint.size(), r.forward_outputs + wrt.size());
  auto phi = [&](const Bindings& b) {
    std::vector<NDArray> out = interpret(g, b, f64);
    double s = 0;
    for (size_t k = 0; k < r.cotangents.size(); ++k) {
      const NDArray& ct = in.at(r.cotangents[k]);
      const NDArray& o = out[std::stoul(r.cotangents[k].substr(5))];
      for (int64_t i = 0; i < o.numel(); ++i) s += o.get(i) * ct.get(i);
    }
    return s;
  };
  const double h = 1e-6;
  size_t checked = 0;
  for (size_t w = 0; w < wrt.size(); ++w) {
    const NDArray& grad = joint[r.forward_outputs + w];
    NDArray x = fwd_in.at(wrt[w]);
    ASSERT_EQ(grad.shape(), x.shape()) << wrt[w];
    int64_t step = std::max<int64_t>(1, x.numel() / 24);
    for (int64_t i = 0; i < x.numel(); i += step) {
      Bindings b = fwd_in;
      NDArray& xi = b.at(wrt[w]);
      xi = NDArray::copy_of(x.dtype(), x.shape(), x.raw(), x.nbytes());
      const double x0 = x.get(i);
      xi.set(i, x0 + h);
      double up = phi(b);
      xi.set(i, x0 - h);
      double down = phi(b);
      double fd = (up - down) / (2 * h), an = grad.get(i);
      EXPECT_NEAR(an, fd, tol * (1 + std::abs(fd))) << "d/d" << wrt[w] << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, wrt.size());
}

void gradcheck(const std::string& what, const Build& build, const SymEnv& sizes = {}, double tol = 1e-6) {
  SCOPED_TRACE(what);
  Graph g(what);
  build(g);
  gradcheck_graph(g, {}, sizes, tol);
}

Type f64(Shape s) { return {DType::f64, std::move(s)}; }

ValueId unary(Graph& g, Op op, const std::string& name = "x", Shape s = {3, 4}) { return g.add(op, {g.add_input(name, f64(s))}); }

TEST(Gradcheck, UnaryOps) {
  for (Op op : {Op::neg, Op::exp, Op::tanh, Op::sin, Op::cos, Op::abs, Op::sigmoid, Op::erf, Op::relu, Op::softplus, Op::leaky_relu,
                Op::expm1, Op::silu, Op::floor})
    gradcheck(std::string(op_def(op).name), [op](Graph& g) { g.set_outputs({unary(g, op)}); });
  for (Op op : {Op::log, Op::sqrt, Op::rsqrt, Op::recip, Op::log1p})  // positive operands
    gradcheck(std::string(op_def(op).name), [op](Graph& g) { g.set_outputs({unary(g, op, "px")}); });
  gradcheck("hardswish", [](Graph& g) {
    ValueId x = g.add(Op::mul, {g.add_input("x", f64({3, 4})), g.add_const(f64({}), std::vector<double>{5.0})});
    g.set_outputs({g.add(Op::hardswish, {x})});
  });
  // The inverse and hyperbolic functions on their domains.
  for (Op op : {Op::tan, Op::asin, Op::acos, Op::atan, Op::sinh, Op::cosh, Op::asinh, Op::acosh, Op::atanh, Op::trunc})
    gradcheck(std::string(op_def(op).name), [op](Graph& g) {
      ValueId x = g.add(Op::tanh, {g.add_input("x", f64({3, 4}))});  // in (-1, 1)
      ValueId in = x;
      if (op == Op::asin || op == Op::acos || op == Op::atanh || op == Op::tan) in = g.add(Op::mul, {x, g.add_const(f64({}), std::vector<double>{0.8})});
      if (op == Op::acosh) in = g.add(Op::add, {g.add(Op::abs, {x}), g.add_const(f64({}), std::vector<double>{1.5})});
      g.set_outputs({g.add(op, {in})});
    });
  gradcheck("atan2", [](Graph& g) {
    ValueId a = g.add_input("x", f64({3, 4})), b = g.add_input("px", f64({4}));
    g.set_outputs({g.add(Op::atan2, {a, b})});
  });
  for (bool approximate : {true, false})
    gradcheck(approximate ? "gelu tanh" : "gelu erf", [approximate](Graph& g) {
      g.set_outputs({g.add(Op::gelu, {g.add_input("x", f64({3, 4}))}, {{"approximate", approximate}})});
    });
  gradcheck("cast f32 and back", [](Graph& g) {
    ValueId x = g.add(Op::cast, {g.add_input("x", f64({5}))}, {{"to", DType::f32}});
    g.set_outputs({g.add(Op::cast, {g.add(Op::exp, {x})}, {{"to", DType::f64}})});
  }, {}, 1e-5);
}

TEST(Gradcheck, BinaryOpsBroadcast) {
  for (Op op : {Op::add, Op::sub, Op::mul, Op::div, Op::max, Op::min})
    gradcheck(std::string(op_def(op).name), [op](Graph& g) {
      ValueId a = g.add_input("pa", f64({2, 3, 4})), b = g.add_input("pb", f64({3, 1}));
      g.set_outputs({g.add(op, {a, b})});
    });
  gradcheck("pow", [](Graph& g) { g.set_outputs({g.add(Op::pow, {g.add_input("pa", f64({3, 4})), g.add_input("b", f64({4}))})}); });
  gradcheck("mul by itself", [](Graph& g) {
    ValueId x = g.add_input("x", f64({4}));
    g.set_outputs({g.add(Op::mul, {x, x})});
  });
  gradcheck("where and clip", [](Graph& g) {
    ValueId x = g.add_input("x", f64({3, 4})), y = g.add_input("y", f64({4}));
    ValueId lo = g.add_input("lo", f64({1}));
    ValueId m = g.add(Op::gt, {x, y});
    ValueId hi = g.add(Op::add, {lo, g.add_const(f64({}), std::vector<double>{0.7})});
    g.set_outputs({g.add(Op::where, {m, x, y}), g.add(Op::clip, {x, lo, hi})});
  });
}

// Random shapes (seeded): two operands of ranks 1 to 3 whose dims are the
// result's or 1, through every binary rule and a reduction of the result.
TEST(Gradcheck, RandomBroadcastShapes) {
  Rng rng(17);
  for (int trial = 0; trial < 6; ++trial) {
    const size_t rank = 1 + rng.next() % 3;
    Shape full, a, b;
    for (size_t i = 0; i < rank; ++i) full.push_back(Dim(static_cast<int64_t>(2 + rng.next() % 3)));
    for (size_t i = 0; i < rank; ++i) {
      a.push_back(rng.next() % 3 == 0 ? Dim(1) : full[i]);
      b.push_back(rng.next() % 3 == 0 ? Dim(1) : full[i]);
    }
    if (rank > 1 && rng.next() % 2) b.erase(b.begin());  // a lower rank: leading dims broadcast
    const Op op = std::vector<Op>{Op::add, Op::sub, Op::mul, Op::div, Op::max, Op::min, Op::pow}[rng.next() % 7];
    gradcheck(std::string(op_def(op).name) + " " + shape_str(a) + " " + shape_str(b), [&](Graph& g) {
      ValueId y = g.add(op, {g.add_input("pa", f64(a)), g.add_input("pb", f64(b))});
      g.set_outputs({y, g.add(Op::mean, {y}, {{"axes", std::vector<int64_t>{0}}})});
    });
  }
}

TEST(Gradcheck, ReductionsAndMatmul) {
  for (Op op : {Op::sum, Op::mean, Op::amax})
    for (bool keep : {false, true})
      gradcheck(std::string(op_def(op).name) + (keep ? " keepdim" : ""), [op, keep](Graph& g) {
        g.set_outputs({g.add(op, {g.add_input("x", f64({2, 3, 5}))}, {{"axes", std::vector<int64_t>{0, 2}}, {"keepdim", keep}})});
      });
  // A vector to a scalar: its rule adds a node while reading the operand's
  // shape (a reference into the graph would dangle).
  gradcheck("sum of a vector", [](Graph& g) {
    g.set_outputs({g.add(Op::sum, {g.add_input("x", f64({4}))}, {{"axes", std::vector<int64_t>{0}}})});
  });
  gradcheck("matmul, batch broadcast", [](Graph& g) {
    ValueId a = g.add_input("a", f64({2, 3, 4})), b = g.add_input("b", f64({4, 5}));
    g.set_outputs({g.add(Op::matmul, {a, b})});
  });
  gradcheck("softmax", [](Graph& g) { g.set_outputs({g.add(Op::softmax, {g.add_input("x", f64({3, 5}))}, {{"axis", int64_t{0}}})}); });
  gradcheck("rms_norm", [](Graph& g) {
    g.set_outputs({g.add(Op::rms_norm, {g.add_input("x", f64({3, 6})), g.add_param("norm_w", f64({6}))}, {{"eps", 1e-3}})});
  });
  gradcheck("layer_norm", [](Graph& g) {
    g.set_outputs({g.add(Op::layer_norm, {g.add_input("x", f64({2, 3, 6})), g.add_param("norm_w", f64({6})), g.add_param("b", f64({6}))})});
  });
}

TEST(Gradcheck, ViewsAndDataMovement) {
  gradcheck("reshape, permute, expand, squeeze, unsqueeze", [](Graph& g) {
    ValueId x = g.add_input("x", f64({2, 1, 6}));
    ValueId y = g.add(Op::reshape, {g.add(Op::squeeze, {x}, {{"axes", std::vector<int64_t>{1}}})}, {{"shape", Shape{2, 3, 2}}});
    y = g.add(Op::permute, {y}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
    y = g.add(Op::expand, {g.add(Op::unsqueeze, {y}, {{"axes", std::vector<int64_t>{0}}})}, {{"shape", Shape{4, 2, 2, 3}}});
    g.set_outputs({y});
  });
  gradcheck("slice and concat", [](Graph& g) {
    ValueId x = g.add_input("x", f64({3, 7})), y = g.add_input("y", f64({3, 2}));
    ValueId s = g.add(Op::slice, {x}, {{"axis", int64_t{1}}, {"start", Dim(2)}, {"end", Dim(5)}});
    g.set_outputs({g.add(Op::concat, {y, s, y}, {{"axis", int64_t{1}}})});
  });
  gradcheck("slices with steps", [](Graph& g) {
    ValueId x = g.add_input("x", f64({3, 10}));
    ValueId a = g.add(Op::slice, {x}, {{"axis", int64_t{1}}, {"start", Dim(1)}, {"end", Dim(9)}, {"step", int64_t{3}}});  // 1, 4, 7
    ValueId b = g.add(Op::slice, {x}, {{"axis", int64_t{0}}, {"start", Dim(0)}, {"end", Dim(3)}, {"step", int64_t{2}}});  // rows 0, 2
    g.set_outputs({a, b});
  });
  gradcheck("gather (repeated and negative indices)", [](Graph& g) {
    ValueId t = g.add_input("x", f64({2, 5, 3}));
    ValueId i = g.add_const({DType::i64, {2, 2}}, std::vector<double>{1, 4, -1, 1});
    g.set_outputs({g.add(Op::gather, {t, i}, {{"axis", int64_t{1}}})});
  });
  gradcheck("scatter_add (repeated and negative indices)", [](Graph& g) {
    ValueId base = g.add_input("b", f64({2, 5, 3})), upd = g.add_input("u", f64({2, 2, 2, 3}));
    ValueId i = g.add_const({DType::i64, {2, 2}}, std::vector<double>{1, 4, -1, 1});
    g.set_outputs({g.add(Op::tanh, {g.add(Op::scatter_add, {base, i, upd}, {{"axis", int64_t{1}}})})});
  });
  gradcheck("kv_write", [](Graph& g) {
    ValueId cache = g.add_input("cache", f64({1, 2, 6, 3})), rows = g.add_input("rows", f64({1, 2, 2, 3}));
    ValueId pos = g.add_const({DType::i64, {}}, std::vector<double>{3});
    g.set_outputs({g.add(Op::exp, {g.add(Op::kv_write, {cache, rows, pos}, {{"axis", int64_t{2}}})})});
  });
}

// flash_attn with grouped heads (4 query heads over 2 KV heads) of batch
// `B`, T queries and S keys, in form 0 plain, 1 causal at an offset, 2 with
// a bias broadcast over heads, 3 with rows that see no key (zero_empty_rows).
void flash_attn_form(Graph& g, int form, const Dim& B, const Dim& T, const Dim& S) {
  ValueId q = g.add_input("q", f64({B, 4, T, 4})), k = g.add_input("k", f64({B, 2, S, 4})), v = g.add_input("v", f64({B, 2, S, 3}));
  std::vector<ValueId> ops = {q, k, v};
  NamedAttrs a = {{"scale", 0.5}};
  if (form >= 1) {
    ops.push_back(g.add_const({DType::i64, {}}, std::vector<double>{form == 3 ? -1.0 : 2.0}));
    a.push_back({"causal", true});
  }
  if (form == 2) {
    ops.push_back(g.add_input("bias", f64({B, 1, T, S})));
    a.push_back({"bias", true});
  }
  if (form == 3) a.push_back({"zero_empty_rows", true});
  g.set_outputs({g.add(Op::flash_attn, ops, a)});
}

TEST(Gradcheck, FlashAttention) {
  for (int form = 0; form < 4; ++form)
    gradcheck("flash_attn form " + std::to_string(form), [form](Graph& g) { flash_attn_form(g, form, 1, 3, 5); });
}

// The same forms with symbolic lengths: the backward that recomputes the
// scores a block of keys at a time (attn_lse, attn_dq, attn_dkv), which the
// rule takes past kWholeScores or when a length is symbolic. The bias is a
// mask here (no gradient wanted: its gradient is the size of the scores).
TEST(Gradcheck, FlashAttentionWithoutTheScoreMatrix) {
  for (int form = 0; form < 4; ++form) {
    SCOPED_TRACE("blocked flash_attn form " + std::to_string(form));
    Graph g("blocked");
    flash_attn_form(g, form, 2, Dim::symbol("t"), Dim::symbol("s"));
    VjpSpec spec;
    spec.wrt = {"q", "k", "v"};
    Graph joint = vjp(g, spec).joint;
    int blocked = 0;
    for (const Node& n : joint.nodes()) blocked += n.op == Op::attn_dq || n.op == Op::attn_dkv || n.op == Op::attn_lse;
    EXPECT_EQ(blocked, 3);
    gradcheck_graph(g, spec, {{"t", 3}, {"s", 5}});
  }
}

// cond: each branch differentiated as a region (the backward is a cond of
// the branches' backwards); a value the branch captures gets its
// gradient too. Both predicate values.
TEST(Gradcheck, Cond) {
  for (bool flag : {true, false}) {
    Tracer t("cond");
    Tensor x = t.input("x", DType::f64, {3}), w = t.input("w", DType::f64, {3}), b = t.input("b", DType::f64, {3});
    Tensor pred = t.constant(DType::boolean, {}, {flag ? 1.0 : 0.0});
    auto r = cond(
        pred, [&b](const std::vector<Tensor>& s) { return std::vector<Tensor>{sin(s[0]) * s[1] + b * b}; },
        [](const std::vector<Tensor>& s) { return std::vector<Tensor>{s[0] * s[0]}; }, {x, w});
    Graph g = t.finish({tanh(r[0])});
    SCOPED_TRACE(flag ? "cond, then" : "cond, else");
    gradcheck_graph(g, {});
  }
  Graph two = parse_graph(
      "graph t\ninput %a : f64[2]\n%0 = exp(%a) : f64[2]\nreturn %0, %a\n\ngraph e\ninput %a : f64[2]\nreturn %a, %a\n\n"
      "graph two\ninput %p : bool[]\ninput %x : f64[2]\n%0 = cond(%p, %x) {then=@t, else=@e} : f64[2]\nreturn %0\n");
  VjpSpec spec;
  spec.wrt = {"x"};
  EXPECT_THROW(vjp(two, spec), Unsupported);  // several results
}

TEST(Gradcheck, Conv) {
  struct C {
    const char* name;
    Shape x, w;
    std::vector<int64_t> stride, dilation, pb, pe;
    int64_t groups;
    bool last = false;  // channels_last: x is [N, d.., C]
  };
  const std::vector<C> cases = {
      {"3x3", {2, 3, 6, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1},
      {"stride 2, asymmetric pads", {1, 2, 7, 8}, {3, 2, 3, 2}, {2, 3}, {1, 1}, {0, 1}, {2, 0}, 1},
      {"dilated, a row left over", {1, 2, 9, 8}, {2, 2, 2, 3}, {3, 2}, {2, 2}, {0, 0}, {0, 0}, 1},
      {"grouped", {2, 4, 5, 5}, {6, 2, 3, 3}, {1, 2}, {1, 1}, {1, 0}, {0, 1}, 2},
      {"depthwise", {1, 3, 6, 6}, {3, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 3},
      {"1d", {2, 2, 9}, {3, 2, 4}, {2}, {1}, {1}, {2}, 1},
      {"channels last, stride 2", {1, 7, 8, 2}, {3, 2, 3, 2}, {2, 3}, {1, 1}, {0, 1}, {2, 0}, 1, true},
      {"channels last, depthwise", {2, 6, 6, 3}, {3, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 3, true},
  };
  for (const C& c : cases)
    gradcheck(c.name, [&](Graph& g) {
      ValueId x = g.add_input("x", f64(c.x)), w = g.add_param("w", f64(c.w)), b = g.add_param("b", f64({c.w[0]}));
      g.set_outputs({g.add(Op::conv, {x, w, b}, {{"stride", c.stride}, {"dilation", c.dilation}, {"pad_begin", c.pb}, {"pad_end", c.pe},
                                                 {"groups", c.groups}, {"channels_last", c.last}})});
    });
}

TEST(Gradcheck, SymbolicDims) {
  const Dim n = Dim::symbol("n");
  gradcheck("symbolic: mean, softmax, matmul, broadcast", [&](Graph& g) {
    ValueId x = g.add_input("x", f64({n, 4})), w = g.add_param("w", f64({4, 3})), b = g.add_param("b", f64({3}));
    ValueId h = g.add(Op::add, {g.add(Op::matmul, {x, w}), b});
    ValueId m = g.add(Op::mean, {g.add(Op::softmax, {h}, {{"axis", int64_t{0}}})}, {{"axes", std::vector<int64_t>{0}}});
    g.set_outputs({m, g.add(Op::silu, {h})});
  }, {{"n", 5}});
}

// The layer's output y differentiated with respect to every weight (the
// RoPE tables are constants of the model) and x.
VjpSpec layer_spec(const Graph& g) {
  VjpSpec spec;
  spec.outputs = {0};
  for (ValueId p : g.params())
    if (g.node(p).name.rfind("rope_", 0) != 0) spec.wrt.push_back(g.node(p).name);
  spec.wrt.push_back("x");
  return spec;
}

// The tiny Llama layer (src/models): RMSNorm, RoPE through gathers, GQA,
// the causal mask, kv_write, SwiGLU; every weight's gradient and x's.
TEST(Gradcheck, LlamaLayer) {
  models::Shapes s;
  s.tokens = 4, s.kv_len = 6, s.dtype = DType::f64;
  Graph g = models::trace_llama_layer(models::llama_config("tiny"), s);
  SCOPED_TRACE("llama layer");
  gradcheck_graph(g, layer_spec(g), {}, 1e-5);
}

// The joint graph is a graph like any other: compiled (passes, fusion,
// generated C++), its gradients match the interpreter's.
TEST(Vjp, CompiledGradientsMatchTheInterpreter) {
  testing::use_scratch_cache("vjp");
  for (DType dt : {DType::f32, DType::f64}) {
    models::Shapes s;
    s.batch = 2, s.tokens = 5, s.kv_len = 8, s.dtype = dt;
    Graph g = models::trace_llama_layer(models::llama_config("tiny"), s);
    Graph joint = vjp(g, layer_spec(g)).joint;
    RandomInputOptions ro;
    ro.seed = 3;
    ro.fixed["pos"] = 2;
    Bindings all = random_inputs(joint, ro), params, inputs;
    for (const auto& [k, v] : all) (joint.node(joint.find(k)).op == Op::param ? params : inputs)[k] = v;
    auto want = interpret(joint, all, {dt});
    Executable exe = tj::compile(joint, params);
    EXPECT_TRUE(exe.stats().compiled);
    Difference d = compare_outputs(exe.run(inputs), want);
    EXPECT_LE(d.max_rel, dt == DType::f32 ? 1e-4 : 1e-12) << dtype_name(dt);
  }
}

TEST(Vjp, ReluBackwardReadsAComparison) {
  Graph g = parse_graph("graph f\ninput %x : f32[4]\n%0 = relu(%x) : f32[4]\nreturn %0\n");
  VjpSpec spec;
  spec.wrt = {"x"};
  EXPECT_EQ(print_graph(vjp(g, spec).joint),
            "graph f\ninput %x : f32[4]\ninput %d_out0 : f32[4]\n%0 = relu(%x) : f32[4]\n%1 = const {value=0.0} : f32[]\n"
            "%2 = gt(%x, %1) : bool[4]\n%3 = const {value=0.0} : f32[]\n%4 = where(%2, %d_out0, %3) : f32[4]\nreturn %0, %4\n");
}

TEST(Vjp, ClearErrors) {
  Graph g = parse_graph("graph f\ninput %x : f32[4]\ninput %i : i64[4]\n%0 = prod(%x) {axes=[0]} : f32[]\nreturn %0\n");
  VjpSpec spec;
  spec.wrt = {"x"};
  EXPECT_THROW(vjp(g, spec), Unsupported);  // no rule for prod
  spec.wrt = {"i"};
  EXPECT_THROW(vjp(g, spec), Error);  // an integer
  spec.wrt = {"nope"};
  EXPECT_THROW(vjp(g, spec), Error);
  Graph v = parse_graph("graph f\ninput %x : f32[4]\n%0 = exp(%x) : f32[4]\nreturn %0\n");
  VjpSpec ones;
  ones.wrt = {"x"};
  ones.seed_ones = true;
  EXPECT_THROW(vjp(v, ones), Error);  // not a scalar loss
}

}  // namespace
}  // namespace tj
