// tjc partition: a graph over a mesh: its shardings propagated from the
// annotated values (the file's, --shard's, --megatron's) and the
// collectives they call for, with their bytes (--report).
#include <cstdio>
#include <map>
#include <memory>

#include "ir/text.h"
#include "models/llama.h"
#include "passes/passes.h"
#include "tensorjit/error.h"
#include "tjc/common.h"

namespace tjc {

using namespace tj;

namespace {

struct PartitionOptions {
  ModelSpec spec;
  std::string file, mesh, megatron;
  std::vector<std::string> shards;
  bool report = false;
};

// "tp=2" or "dp=2,tp=2".
Mesh parse_mesh(const std::string& text) {
  Mesh m;
  for (const std::string& part : split_on(text, ',')) {
    const size_t eq = part.find('=');
    if (eq == std::string::npos || eq == 0) throw Error("--mesh: '" + part + "' is not NAME=N (as in --mesh tp=2 or --mesh dp=2,tp=2)");
    const std::string name = part.substr(0, eq);
    const int64_t n = int_arg(part.substr(eq + 1), "--mesh " + name, 1, int64_t{1} << 20);
    if (m.axis(name) >= 0) throw Error("--mesh: axis " + name + " named twice");
    m.axes.push_back({name, n});
    if (m.devices() > (int64_t{1} << 20)) throw Error("--mesh: more than 2^20 devices");
  }
  return m;
}

// "NAME:DIM=AXES" (AXES: tp, or dp,tp major first).
void apply_shard(Graph& g, const std::string& text) {
  const size_t colon = text.rfind(':'), eq = text.find('=', colon == std::string::npos ? 0 : colon);
  if (colon == std::string::npos || eq == std::string::npos || colon == 0)
    throw Error("--shard: '" + text + "' is not NAME:DIM=AXES (as in --shard wq:1=tp)");
  const std::string name = text.substr(0, colon);
  const ValueId v = g.find(name);
  if (v < 0) throw Error("--shard: the graph has no input or param '" + name + "'");
  const Type& t = g.type(v);
  if (t.rank() == 0) throw Error("--shard: " + name + " " + t.str() + " has no dims to split");
  const int64_t dim = int_arg(text.substr(colon + 1, eq - colon - 1), "--shard " + name + " dim", 0, t.rank() - 1);
  Sharding s = g.sharding_or_whole(v);
  s.dims[static_cast<size_t>(dim)] = split_on(text.substr(eq + 1), ',');
  check_sharding(g.mesh(), t, s);
  g.set_sharding(v, s);
}

void partition(const PartitionOptions& o) {
  ModelSpec spec = o.spec;
  if (!o.file.empty()) spec.ir = o.file;
  Graph g = trace_model(spec);
  if (!o.mesh.empty()) {
    const Mesh m = parse_mesh(o.mesh);
    if (!g.mesh().empty() && !(g.mesh() == m)) throw Error("--mesh " + m.str() + " differs from the graph's mesh " + g.mesh().str());
    g.set_mesh(m);
  }
  if (g.mesh().empty()) throw Error("no mesh: give --mesh (as in --mesh tp=2), or a graph with a mesh line");
  if (!o.megatron.empty()) {
    if (models::annotate_megatron(g, models::llama_config(spec.config), o.megatron) == 0)
      throw Error("--megatron: no param of the graph is a Llama projection (wq, wk, wv, wo, w_gate, w_up, w_down)");
  }
  for (const std::string& s : o.shards) apply_shard(g, s);
  const std::vector<ShardingChoice> choices = propagate_shardings(g);
  const std::vector<Collective> plan = plan_collectives(g);
  std::string out = print_graph(g);
  if (o.report) {
    const std::vector<std::string> names = printed_names(g);
    out += "# shardings chosen:\n";
    for (const ShardingChoice& c : choices) out += "#   " + (c.value < 0 ? std::string() : names[static_cast<size_t>(c.value)] + ": ") + c.why + "\n";
    out += "# collectives:\n";
    const std::string lines = collectives_report(g, plan);
    for (const std::string& l : split_on(lines, '\n'))
      if (!l.empty()) out += "#   " + l + "\n";
    std::map<std::string, int> count;
    int64_t sent = 0;
    for (const Collective& c : plan) ++count[collective_name(c.kind)], sent += c.wire_bytes;
    std::string summary;
    for (const auto& [k, n] : count) summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + k;
    out += "# in all: " + (summary.empty() ? std::string("none") : summary) + "; " + std::to_string(sent) + " bytes sent per device\n";
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

}  // namespace

void add_partition_command(CLI::App& app) {
  auto o = std::make_shared<PartitionOptions>();
  auto* c = app.add_subcommand("partition", "a graph over a device mesh: shardings propagated from the annotated values, and the collectives they call for");
  c->add_option("file", o->file, "IR file (with its mesh and annotations, if any), or - for stdin; without it, the model traced by --model");
  add_trace_options(c, o->spec);
  c->add_option("--mesh", o->mesh, "the device mesh, NAME=N[,NAME=N]: tp=2, dp=2,tp=2");
  c->add_option("--megatron", o->megatron, "annotate a Llama's projections over this mesh axis, Megatron style (Q, K, V, gate, up by columns; O, down by rows)");
  c->add_option("--shard", o->shards, "annotate an input or param: NAME:DIM=AXES, as in wq:1=tp (repeatable)");
  c->add_flag("--report", o->report, "after the graph, as comments: each sharding chosen and why, each collective with its bytes");
  c->callback([o] { partition(*o); });
}

}  // namespace tjc
