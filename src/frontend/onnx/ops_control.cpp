// ONNX control flow: If and Loop onto the IR's cond and while_loop. An If
// whose condition is known at import is its taken branch, inlined. Otherwise
// each subgraph becomes a region: the outer values it reads (its free names,
// nested subgraphs' included) are passed in as operands, or made constants
// of the region where their contents are known at import (so that shape
// operands stay known inside), and its nodes are converted by the same
// converters into the region's tracer.
#include <algorithm>
#include <set>

#include "frontend/onnx/context.h"

namespace tj::onnx_import {

namespace {

// The names `g` reads that it does not define (its inputs, initializers and
// node outputs define names), in order of first use, nested subgraphs
// included.
void free_names(const onnx::GraphProto& g, std::vector<std::string>* out) {
  std::set<std::string> defined, seen;
  for (const auto& i : g.input()) defined.insert(i.name());
  for (const auto& i : g.initializer()) defined.insert(i.name());
  auto use = [&](const std::string& n) {
    if (!n.empty() && !defined.count(n) && seen.insert(n).second) out->push_back(n);
  };
  for (const auto& n : g.node()) {
    for (const auto& i : n.input()) use(i);
    for (const auto& a : n.attribute()) {
      std::vector<std::string> inner;
      if (a.has_g()) free_names(a.g(), &inner);
      for (const auto& sub : a.graphs()) free_names(sub, &inner);
      for (const auto& i : inner) use(i);
    }
    for (const auto& o : n.output()) defined.insert(o);
  }
  for (const auto& o : g.output()) use(o.name());
}

// How a region sees the outer values its subgraphs read: known ones as
// constants, the rest as region inputs (operands of the control-flow op).
struct Captures {
  std::vector<std::string> known, passed;
  std::vector<Tensor> operands;  // the outer tensors of `passed`
};

Captures captures_of(const Ctx& c, const std::vector<const onnx::GraphProto*>& graphs, const std::set<std::string>& own) {
  std::vector<std::string> names;
  for (const auto* g : graphs) free_names(*g, &names);
  Captures r;
  std::set<std::string> seen;
  for (const auto& n : names) {
    if (own.count(n) || !seen.insert(n).second) continue;
    auto it = c.values.find(n);
    if (it == c.values.end()) c.fail("a subgraph reads '" + n + "', which is not defined before it");
    if (it->second.known) {
      r.known.push_back(n);
    } else {
      r.passed.push_back(n);
      r.operands.push_back(it->second.t);
    }
  }
  return r;
}

// A context for converting a subgraph into the region being traced by `t`:
// the known captures as constants, the passed ones bound to `args` (the
// region's inputs for them), the subgraph's own initializers as constants.
Ctx region_ctx(const Ctx& outer, Tracer& t, const Captures& caps, const std::vector<Tensor>& args, const onnx::GraphProto& g) {
  Ctx sub{t, {}, outer.opset, outer.node, outer.base_dir};
  for (const auto& n : caps.known) {
    const Value& v = outer.values.at(n);
    sub.values[n] = Value{t.constant(*v.known), v.known, v.dims};
  }
  for (size_t i = 0; i < caps.passed.size(); ++i) {
    const Value& v = outer.values.at(caps.passed[i]);
    sub.values[caps.passed[i]] = Value{args[i], std::nullopt, v.dims};
  }
  for (const auto& init : g.initializer()) {
    NDArray a = tensor_value(init, "a subgraph's initializer", outer.base_dir);
    sub.values[init.name()] = Value{t.constant(a), a};
  }
  return sub;
}

// The subgraph's outputs after its nodes are converted.
std::vector<Tensor> graph_outputs(const Ctx& sub, const onnx::GraphProto& g) {
  std::vector<Tensor> r;
  for (const auto& o : g.output()) {
    auto it = sub.values.find(o.name());
    if (it == sub.values.end()) sub.fail("the subgraph's output '" + o.name() + "' is not computed");
    r.push_back(it->second.t);
  }
  return r;
}

const onnx::GraphProto& graph_attr(const Ctx& c, const char* name) {
  const auto* a = c.attr(name);
  if (!a || !a->has_g()) c.fail(std::string("the node needs a graph attribute '") + name + "'");
  return a->g();
}

// A one-element operand as a scalar.
Tensor scalar_of(const Ctx& c, const Tensor& x, const char* what) {
  if (x.shape().empty()) return x;
  for (const Dim& d : x.shape())
    if (d != Dim(1)) c.fail(std::string(what) + " must have one element, got " + shape_str(x.shape()));
  return reshape(x, {});
}

R if_(Ctx& c) {
  const Value& cond = c.input(0);
  const onnx::GraphProto& then_g = graph_attr(c, "then_branch");
  const onnx::GraphProto& else_g = graph_attr(c, "else_branch");
  const onnx::NodeProto* node = c.node;
  if (cond.known) {  // the taken branch, inlined
    if (cond.known->numel() != 1) c.fail("the condition must have one element");
    const onnx::GraphProto& g = cond.known->get(0) != 0 ? then_g : else_g;
    convert_nodes(c, g);
    c.node = node;
    R r;
    for (const auto& o : g.output()) {
      auto it = c.values.find(o.name());
      if (it == c.values.end()) c.fail("the branch's output '" + o.name() + "' is not computed");
      r.push_back(it->second);
    }
    if (static_cast<int>(r.size()) != c.node->output_size())
      c.fail("the branch has " + std::to_string(r.size()) + " outputs, the node " + std::to_string(c.node->output_size()));
    return r;
  }
  if (then_g.output_size() != node->output_size() || else_g.output_size() != node->output_size())
    c.fail("the branches' outputs (" + std::to_string(then_g.output_size()) + ", " + std::to_string(else_g.output_size()) +
           ") are not the node's " + std::to_string(node->output_size()));
  Tensor pred = scalar_of(c, cond.t, "the condition");
  Captures caps = captures_of(c, {&then_g, &else_g}, {});
  // The condition goes in first, so that every region has an input (its tracer).
  std::vector<Tensor> operands{pred};
  operands.insert(operands.end(), caps.operands.begin(), caps.operands.end());
  auto branch = [&](const onnx::GraphProto& g) -> StateFn {
    return [&c, &caps, &g](const std::vector<Tensor>& s) {
      Ctx sub = region_ctx(c, *s[0].tracer(), caps, std::vector<Tensor>(s.begin() + 1, s.end()), g);
      convert_nodes(sub, g);
      return graph_outputs(sub, g);
    };
  };
  std::vector<Tensor> outs;
  try {
    outs = tj::cond(pred, branch(then_g), branch(else_g), operands);
  } catch (const ShapeError& e) {
    c.node = node;
    c.fail(std::string("the branches differ (the IR's cond needs the same types from both): ") + e.what());
  }
  c.node = node;
  R r;
  for (const Tensor& t : outs) r.push_back(v(t));
  return r;
}

// Whether the body returns its condition input unchanged (directly or
// through Identity nodes): then the condition never ends the loop early.
bool passes_condition_through(const onnx::GraphProto& body) {
  std::string name = body.output(0).name();
  for (;;) {
    if (name == body.input(1).name()) return true;
    const onnx::NodeProto* producer = nullptr;
    for (const auto& n : body.node())
      for (const auto& o : n.output())
        if (o == name) producer = &n;
    if (!producer || producer->op_type() != "Identity" || producer->input_size() != 1) return false;
    name = producer->input(0);
  }
}

// Loop(M, cond, v...) with body (iteration, cond, v...) -> (cond, v..., scans...):
// a while_loop carrying (iteration, cond, v..., the passed captures...,
// one buffer per scan output). Scan outputs need a trip count known at
// import and no early end: no condition input (a for loop: the body's
// condition output is ignored, as the spec says), or one known at import
// that the body passes through unchanged. Each iteration writes its row of
// the buffer.
R loop(Ctx& c) {
  const onnx::GraphProto& body = graph_attr(c, "body");
  const onnx::NodeProto* node = c.node;
  const bool has_m = c.has_input(0), has_cond = c.has_input(1);
  const int n = node->input_size() - 2;
  if (n < 0) c.fail("Loop takes M, cond and the initial values");
  if (body.input_size() != n + 2) c.fail("the body takes " + std::to_string(body.input_size()) + " inputs, not iteration, condition and " + std::to_string(n) + " values");
  const int scans = body.output_size() - 1 - n;
  if (scans < 0) c.fail("the body returns " + std::to_string(body.output_size()) + " values, fewer than the condition and " + std::to_string(n) + " values");
  if (node->output_size() > n + scans) c.fail("the node has more outputs than the loop's values and scan outputs");
  if (!has_m && !has_cond) c.unsupported("Loop with neither a trip count nor a condition (it never ends)");
  std::optional<Tensor> trips;
  if (has_m) trips = cast(scalar_of(c, c.in(0), "the trip count M"), DType::i64);
  int64_t known_trips = 0;  // the scans' length
  if (scans > 0) {
    // The scans' length must be known: M iterations, none ending early.
    if (!has_m) c.unsupported("Loop with scan outputs and no trip count (the scans' length is known only at run time)");
    const NDArray& m = c.known(0, "the trip count of a Loop with scan outputs");
    if (m.numel() != 1) c.fail("the trip count M must have one element");
    known_trips = std::max<int64_t>(static_cast<int64_t>(m.get(0)), 0);
    if (has_cond) {
      const Value& c0 = c.input(1);
      if (!c0.known || !passes_condition_through(body))
        c.unsupported("Loop with scan outputs and a condition that may end it early (the scans' length is known only at run time)");
      if (c0.known->numel() != 1) c.fail("the condition must have one element");
      if (c0.known->get(0) == 0) known_trips = 0;
    }
  }
  std::set<std::string> own;
  for (const auto& i : body.input()) own.insert(i.name());
  Captures caps = captures_of(c, {&body}, own);

  // State: iteration, condition, the values, the passed captures, the scan buffers.
  std::vector<Tensor> init{c.scalar(0, DType::i64), has_cond ? cast(scalar_of(c, c.in(1), "the condition"), DType::boolean) : c.scalar(1, DType::boolean)};
  for (int i = 0; i < n; ++i) init.push_back(c.in(static_cast<size_t>(2 + i)));
  init.insert(init.end(), caps.operands.begin(), caps.operands.end());
  const size_t first_cap = static_cast<size_t>(2 + n), first_scan = first_cap + caps.operands.size();

  // The body of one iteration over state `s`: its outputs (condition, values, scans).
  auto run_body = [&c, &body, &caps, n, first_cap, first_scan](const std::vector<Tensor>& s) {
    std::vector<Tensor> passed(s.begin() + static_cast<std::ptrdiff_t>(first_cap), s.begin() + static_cast<std::ptrdiff_t>(first_scan));
    Ctx sub = region_ctx(c, *s[0].tracer(), caps, passed, body);
    sub.values[body.input(0).name()] = v(s[0]);
    sub.values[body.input(1).name()] = v(s[1]);
    for (int i = 0; i < n; ++i) sub.values[body.input(2 + i).name()] = v(s[static_cast<size_t>(2 + i)]);
    convert_nodes(sub, body);
    return graph_outputs(sub, body);
  };
  if (scans > 0) {
    // The scan outputs' types, from a conversion of the body on its own.
    Tracer probe("loop_probe");
    std::vector<Tensor> ps;
    for (const Tensor& t : init) ps.push_back(probe.input("s" + std::to_string(ps.size()), t.dtype(), t.shape()));
    std::vector<Tensor> outs = run_body(ps);
    c.node = node;
    for (int j = 0; j < scans; ++j) {
      const Tensor& sv = outs[static_cast<size_t>(1 + n + j)];
      Shape buf{Dim(known_trips)};
      buf.insert(buf.end(), sv.shape().begin(), sv.shape().end());
      init.push_back(expand(c.scalar(0, sv.dtype()), buf));
    }
  }
  auto cond_fn = [&](const std::vector<Tensor>& s) {
    Tensor go = s[1];
    if (trips) go = logical_and(lt(s[0], *trips), go);
    return go;
  };
  auto body_fn = [&](const std::vector<Tensor>& s) {
    std::vector<Tensor> outs = run_body(s);
    std::vector<Tensor> next{s[0] + 1.0, has_cond ? cast(scalar_of(c, outs[0], "the body's condition"), DType::boolean) : s[1]};
    for (int i = 0; i < n; ++i) next.push_back(outs[static_cast<size_t>(1 + i)]);
    for (size_t i = first_cap; i < first_scan; ++i) next.push_back(s[i]);
    for (int j = 0; j < scans; ++j)
      next.push_back(kv_write(s[first_scan + static_cast<size_t>(j)], unsqueeze(outs[static_cast<size_t>(1 + n + j)], {0}), s[0], 0));
    return next;
  };
  std::vector<Tensor> fin;
  try {
    fin = tj::while_loop(cond_fn, body_fn, init);
  } catch (const ShapeError& e) {
    c.node = node;
    c.fail(std::string("the body changes a loop value's type (the IR's while_loop keeps them): ") + e.what());
  }
  c.node = node;
  R r;
  for (int i = 0; i < n; ++i) r.push_back(v(fin[static_cast<size_t>(2 + i)]));
  for (int j = 0; j < scans; ++j) r.push_back(v(fin[first_scan + static_cast<size_t>(j)]));
  r.resize(static_cast<size_t>(node->output_size()));
  return r;
}

}  // namespace

void add_control_ops(ConverterTable& t) { t.insert({{"If", if_}, {"Loop", loop}}); }

}  // namespace tj::onnx_import
