#include "ir/extract.h"

#include <map>
#include <string>

#include "tensorjit/error.h"

namespace tj {

Graph extract_range(const Graph& g, size_t begin, size_t end, const std::vector<ValueId>& outs, const std::string& name,
                    const std::function<ValueId(Graph& s, ValueId v)>& outside) {
  Graph s(name);
  std::map<ValueId, ValueId> map;
  auto ref = [&](ValueId v) {
    if (auto it = map.find(v); it != map.end()) return it->second;
    ValueId nv = outside(s, v);
    map[v] = nv;
    return nv;
  };
  for (size_t i = begin; i < end; ++i) {
    const Node& n = g.nodes()[i];
    if (n.op == Op::input || n.op == Op::param || n.op == Op::constant) continue;  // brought in where used
    std::vector<ValueId> ins;
    for (ValueId v : n.inputs) ins.push_back(ref(v));
    map[static_cast<ValueId>(i)] = s.add_raw(n.op, std::move(ins), n.attrs);
  }
  std::vector<ValueId> so;
  for (ValueId v : outs) so.push_back(ref(v));
  s.set_outputs(so);
  return s;
}

Graph copy_graph(const Graph& g, const std::function<ValueId(Graph& s, ValueId v)>& leaf) {
  Graph s(g.name());
  std::vector<ValueId> map(g.size(), -1);
  auto ref = [&](ValueId v) {
    ValueId nv = map[static_cast<size_t>(v)];
    if (nv < 0) throw Error("copy_graph: %" + std::to_string(v) + " was left out, but is read");
    return nv;
  };
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op == Op::input || n.op == Op::param || n.op == Op::constant) {
      map[i] = leaf(s, static_cast<ValueId>(i));
      continue;
    }
    std::vector<ValueId> ins;
    for (ValueId v : n.inputs) ins.push_back(ref(v));
    map[i] = s.add_raw(n.op, std::move(ins), n.attrs);
  }
  std::vector<ValueId> outs;
  for (ValueId v : g.outputs()) outs.push_back(ref(v));
  s.set_outputs(outs);
  return s;
}

}  // namespace tj
