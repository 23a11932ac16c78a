#include "ir/verifier.h"

#include <set>

#include "tensorjit/error.h"

namespace tj {

void verify(const Graph& g) {
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
            if (const auto* r = std::get_if<Region>(&a)) verify(**r);
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
}

}  // namespace tj
