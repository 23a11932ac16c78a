#include "runtime/host_program.h"

#include <map>
#include <set>

#include "ir/extract.h"
#include "tensorjit/error.h"

namespace tj {

bool has_control_flow(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.def().category == OpCategory::control) return true;
  return false;
}

// One step: a compiled graph over a run of plain ops, or one control-flow op.
struct HostProgram::Step {
  // A run of plain ops: its graph's inputs come from these values (graph
  // inputs and params by name, earlier results as m0, m1, ...).
  std::shared_ptr<Executable> exe;
  std::vector<std::pair<std::string, ValueId>> feeds;  // input name -> value of g
  std::vector<ValueId> produces;                       // its outputs, in order
  // A control-flow op.
  ValueId op = -1;
  std::vector<std::shared_ptr<Executable>> regions;  // while: cond, body; cond: then, else
};

namespace {

// The graph of g's nodes [begin, end), with the values later steps use as outputs.
Graph run_graph(const Graph& g, size_t begin, size_t end, const std::vector<ValueId>& outs, std::vector<std::pair<std::string, ValueId>>* feeds) {
  return extract_range(g, begin, end, outs, g.name() + ".part" + std::to_string(begin), [&](Graph& s, ValueId v) {
    const Node& n = g.node(v);
    if (n.op == Op::constant) return s.copy_const(n);
    std::string name = n.op == Op::input || n.op == Op::param ? n.name : "m" + std::to_string(feeds->size());
    feeds->push_back({name, v});
    return s.add_input(name, n.type);
  });
}

}  // namespace

namespace {

// The regions compiled so far in one outermost compile, by graph: a region
// referenced from several places (then and else, or several levels of a
// chain) is compiled once, so compiling is linear in the distinct regions.
thread_local std::map<const Graph*, std::shared_ptr<Executable>>* compiled_regions = nullptr;

}  // namespace

HostProgram::HostProgram(const Graph& g, const CompilePart& compile_part) : g_(g) {
  std::map<const Graph*, std::shared_ptr<Executable>> mine;
  struct Scope {
    bool outermost = compiled_regions == nullptr;
    explicit Scope(std::map<const Graph*, std::shared_ptr<Executable>>* m) {
      if (outermost) compiled_regions = m;
    }
    ~Scope() {
      if (outermost) compiled_regions = nullptr;
    }
  } scope(&mine);
  // Values used after each node.
  std::vector<size_t> last_use(g.size(), 0);
  for (size_t i = 0; i < g.size(); ++i)
    for (ValueId v : g.nodes()[i].inputs) last_use[static_cast<size_t>(v)] = i;
  for (ValueId v : g.outputs()) last_use[static_cast<size_t>(v)] = g.size();
  size_t begin = 0;
  auto close_run = [&](size_t end) {
    std::vector<ValueId> outs;
    for (size_t i = begin; i < end; ++i) {
      const Node& n = g.nodes()[i];
      if (n.def().category != OpCategory::source && last_use[i] >= end) outs.push_back(static_cast<ValueId>(i));
    }
    if (!outs.empty()) {
      auto st = std::make_shared<Step>();
      Graph part = run_graph(g, begin, end, outs, &st->feeds);
      st->exe = std::make_shared<Executable>(compile_part(part, false));
      st->produces = outs;
      steps_.push_back(st);
    }
    begin = end + 1;
  };
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.def().category != OpCategory::control) continue;
    close_run(i);
    if (n.op == Op::result) continue;  // read from its producer's results
    auto st = std::make_shared<Step>();
    st->op = static_cast<ValueId>(i);
    for (const char* r : n.op == Op::while_loop ? std::vector<const char*>{"cond", "body"} : std::vector<const char*>{"then", "else"}) {
      const Graph* region = std::get<Region>(n.attr(r)).get();
      auto& exe = (*compiled_regions)[region];
      if (!exe) exe = std::make_shared<Executable>(compile_part(*region, true));
      st->regions.push_back(exe);
    }
    steps_.push_back(st);
  }
  close_run(g.size());
}

std::vector<NDArray> HostProgram::run(Bindings& inputs) {
  const Graph& g = g_;
  std::map<ValueId, NDArray> vals;
  std::map<ValueId, std::vector<NDArray>> results;
  auto value = [&](ValueId v) -> const NDArray& {
    const Node& n = g.node(v);
    if (n.op == Op::input || n.op == Op::param) return inputs.at(n.name);
    if (n.op == Op::result) return results.at(n.inputs[0]).at(static_cast<size_t>(n.attr_int("index")));
    if (n.op == Op::constant && !vals.count(v)) vals[v] = n.const_data()->to_array(eval_shape(n.type.shape, {}));
    return vals.at(v);
  };
  // A region's inputs (s0.., c0..) bound in order to the op's operands.
  auto apply = [](Executable& e, const Graph& r, const std::vector<const NDArray*>& args) {
    Bindings b;
    const auto ins = r.inputs();
    for (size_t i = 0; i < ins.size(); ++i) b[r.node(ins[i]).name] = *args[i];
    return e.run(b);
  };
  for (auto& st : steps_) {
    if (st->exe) {
      Bindings b;
      for (const auto& [name, v] : st->feeds) b[name] = value(v);
      auto out = st->exe->run(b);
      for (size_t k = 0; k < out.size(); ++k) vals[st->produces[k]] = std::move(out[k]);
      continue;
    }
    const Node& n = g.node(st->op);
    std::vector<NDArray> args;
    for (ValueId v : n.inputs) args.push_back(value(v));
    std::vector<NDArray> res;
    if (n.op == Op::cond) {
      bool taken = args[0].to_vector().at(0) != 0;
      std::vector<const NDArray*> a;
      for (size_t i = 1; i < args.size(); ++i) a.push_back(&args[i]);
      const Graph& r = *std::get<Region>(n.attr(taken ? "then" : "else"));
      res = apply(*st->regions[taken ? 0 : 1], r, a);
    } else {
      // cond and body take the same inputs: one binding map for the whole
      // loop, the carried values moved in and out, the rest bound once.
      const Graph& cr = *std::get<Region>(n.attr("cond"));
      size_t carried = static_cast<size_t>(n.attr_int("carried"));
      const auto ins = cr.inputs();
      std::vector<std::string> names;
      Bindings b;
      for (size_t i = 0; i < ins.size(); ++i) names.push_back(cr.node(ins[i]).name), b[names.back()] = std::move(args[i]);
      std::vector<NDArray> flag, next;
      for (;;) {
        st->regions[0]->run(b, flag);
        if (flag.at(0).to_vector().at(0) == 0) break;
        st->regions[1]->run(b, next);
        for (size_t i = 0; i < carried; ++i) std::swap(b[names[i]], next[i]);
      }
      res.clear();
      for (size_t i = 0; i < carried; ++i) res.push_back(std::move(b[names[i]]));
    }
    vals[st->op] = res.at(0);
    results[st->op] = std::move(res);
  }
  std::vector<NDArray> out;
  for (ValueId v : g.outputs()) out.push_back(value(v));
  return out;
}

int64_t HostProgram::graphs() const {
  int64_t n = 0;
  for (const auto& st : steps_) n += st->exe ? 1 : static_cast<int64_t>(st->regions.size());
  return n;
}

}  // namespace tj
