// cse: value numbering. Two nodes with the same op, the same operands and the
// same attributes compute the same value, so the later one is replaced by the
// earlier. Operands of commutative ops are put in canonical order first
// (a+b and b+a meet) where the swap changes no bit: integer and boolean
// operands, and comparisons. Float add, mul, max and min keep their order:
// with NaNs on both sides, the result is the first one's (x86's addss, and
// tj_max by definition; a max pool's window form folded by max, reordered,
// returned another tap's NaN payload). Constants with the same type and bitwise-equal data
// are merged. Guarantees a bit-identical result (all ops are deterministic).
// Leaves the duplicates for dce to remove.
#include <bit>
#include <cstring>
#include <unordered_map>

#include <xxhash.h>

#include "ir/rewriter.h"
#include "passes/passes.h"

namespace tj {

namespace {

struct Key {
  Op op;
  std::vector<ValueId> inputs;
  const Node* node;  // for attributes, type and constant data

  bool operator==(const Key& o) const {
    if (op != o.op || inputs != o.inputs || node->type != o.node->type) return false;
    if (op != Op::constant) return node->attrs == o.node->attrs;
    const auto& a = *node->const_data();
    const auto& b = *o.node->const_data();
    return a.dtype() == b.dtype() && a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
  }
};

size_t hash_attr(const AttrValue& a) {
  return std::visit(
      [](const auto& v) -> size_t {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, int64_t> || std::is_same_v<V, bool>) return std::hash<int64_t>()(v);
        else if constexpr (std::is_same_v<V, double>) return std::hash<uint64_t>()(std::bit_cast<uint64_t>(v));
        else if constexpr (std::is_same_v<V, DType>) return static_cast<size_t>(v);
        else if constexpr (std::is_same_v<V, Dim>) return v.hash();
        else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
          size_t h = v.size();
          for (int64_t x : v) h = h * 31 + std::hash<int64_t>()(x);
          return h;
        } else if constexpr (std::is_same_v<V, Shape>) {
          size_t h = v.size();
          for (const Dim& d : v) h = h * 31 + d.hash();
          return h;
        } else if constexpr (std::is_same_v<V, Region>) {  // by identity: equal regions are the same graph
          return std::hash<const void*>()(v.get());
        } else {  // ConstData
          return static_cast<size_t>(XXH3_64bits(v->raw(), v->nbytes()));
        }
      },
      a);
}

struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = static_cast<size_t>(k.op);
    for (ValueId v : k.inputs) h = h * 1000003u + static_cast<size_t>(v);
    for (const auto& a : k.node->attrs) h = h * 31 + hash_attr(a);
    return h;
  }
};

}  // namespace

bool cse(Graph& g, const PassOptions&) {
  bool changed = false;
  std::unordered_map<Key, ValueId, KeyHash> seen;
  Rewriter rw(g);
  g = rw.run([&](ValueId v) -> ValueId {
    const Node& n = g.node(v);
    std::vector<ValueId> ins = rw.map_all(n.inputs);
    const bool swaps_exactly = n.def().commutative && (!is_float(g.type(n.inputs[0]).dtype) || n.op == Op::eq || n.op == Op::ne);
    if (swaps_exactly && !std::is_sorted(ins.begin(), ins.end())) {
      std::sort(ins.begin(), ins.end());
      changed = true;
    }
    Key key{n.op, ins, &n};
    auto it = seen.find(key);
    if (it != seen.end()) {
      changed = true;
      return it->second;
    }
    ValueId nv = n.op == Op::constant ? rw.copy(v) : rw.out().add_raw(n.op, ins, n.attrs);
    seen.emplace(std::move(key), nv);
    return nv;
  });
  return changed;
}

}  // namespace tj
