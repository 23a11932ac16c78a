#include "compiler/compile.h"

#include <cstdio>
#include <mutex>

#include "compiler/driver.h"
#include "ir/text.h"
#include "support/log.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

void warn_once_no_compiler() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::fprintf(stderr,
                 "tensorjit: warning: no C++ compiler found ($TJ_CXX, c++, g++, clang++); running on the interpreter\n");
  });
}

// The program as what runs it, with its compilation's record.
Executable finish(Compilation& c, const Bindings& params, const CompileOptions& o) {
  std::optional<Executable> e;
  if (c.form == Form::host) {  // the host runs the control flow, compiled graphs the rest
    CompileOptions regions = o;
    regions.donate.clear();  // regions and parts have their own inputs and outputs: the host copies
    CompileOptions part = regions;
    part.passes = {"dce"};  // the graph is optimized already; regions get the default pipeline
    e = Executable::on_host(std::move(c.graph), [&](const Graph& g, bool region) { return compile(g, {}, region ? regions : part); }, {});
  } else if (c.form == Form::interpreter) {
    warn_once_no_compiler();
    e = Executable::interpreted(std::move(c.graph), params, {});
  } else {
    e = std::move(*c.exe);
  }
  CompileStats s = e->stats();
  s.program_cache_hit = c.program_cache_hit;
  s.program_key = c.key;
  s.cache_hit = c.built.cache_hit;
  s.compile_seconds = c.built.compile_seconds;
  s.load_seconds = c.built.load_seconds;
  s.source_path = c.built.source_path;
  s.compiler_said = c.built.compiler_said;
  s.stage_seconds = stage_seconds(c);
  e->set_stats(s);
  if (log_enabled("compile")) {
    double total = 0;
    for (const auto& [name, sec] : s.stage_seconds) total += sec;
    const std::string where = e->device() == "cpu" ? "" : " on " + e->device();
    std::fprintf(stderr, "[compile] %zu kernels%s in %.3f s: %s\n", s.kernels, where.c_str(), total, stages_text(c).c_str());
  }
  return std::move(*e);
}

}  // namespace

Executable compile(const Graph& graph, const Bindings& params, const CompileOptions& o) {
  for (ValueId p : graph.params()) {
    const Node& n = graph.node(p);
    auto it = params.find(n.name);
    if (it == params.end()) throw Error("compile: no value for param '" + n.name + "'");
    const NDArray& a = it->second;
    bool fits = a.dtype() == n.type.dtype && a.shape().size() == n.type.shape.size();
    for (size_t d = 0; fits && d < a.shape().size(); ++d) fits = !n.type.shape[d].is_const() || n.type.shape[d].value() == a.shape()[d];
    if (!fits) throw Error("compile: param '" + n.name + "' is " + a.type_str() + ", expected " + n.type.str());
  }
  // The graph as compiled (its weights still params): `tjc bench FILE
  // --profile` times its kernels. Constants over 4096 elements are summarized.
  if (log_enabled("ir")) std::fprintf(stderr, "[ir] compiling:\n%s", print_graph(graph, PrintOptions{4096}).c_str());
  Compilation c;
  run_stages(c, &graph, params, o);
  return finish(c, params, o);
}

std::optional<Executable> compile_prepared(const std::string& program_key, const CompileOptions& o) {
  Compilation c;
  c.key = program_key;
  if (!run_stages(c, nullptr, {}, o)) return std::nullopt;
  return finish(c, {}, o);
}

}  // namespace tj
