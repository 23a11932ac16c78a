// A traced (or parsed) graph, as users hold it: a value that can be printed
// as the IR's text (docs/ir.md), read back, asked for its inputs, params and
// outputs, and compiled (tensorjit/compile.h). The IR itself (tj::Graph,
// src/ir/graph.h) is internal; a TracedGraph holds one.
//
//   tj::Tracer t("mlp");
//   auto x = t.input("x", tj::DType::f32, {tj::Dim::symbol("T"), 128});
//   tj::TracedGraph g = t.finish({tj::relu(x)});
//   std::puts(g.text().c_str());
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tensorjit/type.h"

namespace tj {

class Graph;  // the IR (internal: src/ir/graph.h)

// A named, typed value at a graph's or executable's boundary.
struct Port {
  std::string name;  // outputs: "out0", "out1", ...
  Type type;
};

class TracedGraph {
 public:
  TracedGraph();
  explicit TracedGraph(Graph g);
  // The IR's text format; throws tj::ParseError (with line and column).
  static TracedGraph parse(std::string_view text);

  std::string name() const;
  std::string text() const;  // every constant in full: parse() reads it back bit for bit
  std::vector<Port> inputs() const;   // runtime inputs, in order
  std::vector<Port> params() const;   // weights, in order
  std::vector<Port> outputs() const;

  // For tensorjit's own code (which sees src/ir/graph.h).
  const Graph& graph() const;
  operator Graph() const&;
  operator Graph() &&;

 private:
  std::shared_ptr<Graph> g_;
};

}  // namespace tj
