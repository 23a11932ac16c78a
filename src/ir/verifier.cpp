#include "ir/verifier.h"

#include <algorithm>
#include <map>
#include <set>

#include "tensorjit/error.h"

namespace tj {

namespace {

// Verifies g and every region below it, each region once however often it
// is referenced (so the work is linear in the graph and its regions), and
// returns g's nesting (1: no regions). `depth` is g's own depth below the
// graph verify() was called on: recursion stops at kMaxRegionNesting.
int verify_graph(const Graph& g, int depth, std::map<const Graph*, int>& done) {
  if (depth > kMaxRegionNesting) throw Error("verifier: regions nested more than " + std::to_string(kMaxRegionNesting) + " deep");
  int nesting = 1;
  std::set<std::string, std::less<>> names;
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    const OpDef& def = n.def();
    auto fail = [&](const std::string& msg) {
      throw Error("verifier: node %" + std::to_string(i) + " (" + def.name + "): " + msg);
    };
    for (ValueId v : n.inputs)
      if (v < 0 || static_cast<size_t>(v) >= i) fail("operand %" + std::to_string(v) + " is not defined before its use");
    if (n.attrs.size() != def.attrs.size()) fail("wrong number of attributes");
    for (size_t k = 0; k < n.attrs.size(); ++k)
      if (n.attrs[k].index() != static_cast<size_t>(def.attrs[k].kind)) fail(std::string("attribute '") + def.attrs[k].name + "' has the wrong kind");
    switch (n.op) {
      case Op::input:
      case Op::param:
        if (n.name.empty()) fail("unnamed input");
        if (!names.insert(n.name).second) fail("duplicate input or param name '" + n.name + "'");
        break;
      case Op::constant: {
        auto count = numel_const(n.type.shape);
        const auto& d = n.const_data();
        if (!count) fail("constant with a symbolic shape");
        if (!d || (d->size() != 1 && static_cast<int64_t>(d->size()) != *count)) fail("constant data size does not match its type");
        break;
      }
      case Op::result: {
        Type t;
        try {
          t = result_type(g, n.inputs.at(0), n.attr_int("index"));
        } catch (const Error& e) {
          fail(e.what());
        }
        if (t != n.type) fail("type " + n.type.str() + " differs from its producer's result " + t.str());
        break;
      }
      default: {
        if (n.def().category == OpCategory::control)  // regions are graphs of their own
          for (const AttrValue& a : n.attrs)
            if (const auto* r = std::get_if<Region>(&a)) {
              if (!*r) fail("missing region");
              auto it = done.find(r->get());
              int below = it != done.end() ? it->second : (done[r->get()] = verify_graph(**r, depth + 1, done));
              nesting = std::max(nesting, below + 1);
              if (depth + nesting - 1 > kMaxRegionNesting)
                throw Error("verifier: regions nested more than " + std::to_string(kMaxRegionNesting) + " deep");
            }
        std::vector<Type> types;
        for (ValueId v : n.inputs) types.push_back(g.type(v));
        std::vector<AttrValue> attrs = n.attrs;
        Type t;
        try {
          t = infer_type(n.op, types, attrs);
        } catch (const Error& e) {
          fail(e.what());
        }
        if (t != n.type) fail("type " + n.type.str() + " differs from inferred " + t.str());
        if (attrs != n.attrs) fail("attributes are not in canonical form");
      }
    }
  }
  for (ValueId v : g.outputs())
    if (v < 0 || static_cast<size_t>(v) >= g.size()) throw Error("verifier: output %" + std::to_string(v) + " is not defined");
  for (size_t i = 0; i < g.size(); ++i)
    if (const Sharding* s = g.sharding(static_cast<ValueId>(i))) {
      try {
        check_sharding(g.mesh(), g.nodes()[i].type, *s);
      } catch (const Error& e) {
        throw Error("verifier: node %" + std::to_string(i) + " (" + g.nodes()[i].def().name + "): " + e.what());
      }
    }
  return nesting;
}

}  // namespace

void verify(const Graph& g) {
  std::map<const Graph*, int> done;
  (void)verify_graph(g, 1, done);
}

}  // namespace tj
