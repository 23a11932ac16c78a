// The GPU emitter's pointwise kernels and stores: a work-item per element,
// every elementwise op in registers; a store (concat, kv_write,
// scatter_add) ends a launch and runs as launches of its own.
#include "codegen/gpu/emitter.h"

#include "tensorjit/error.h"

namespace tj::gpu {

size_t Emitter::segment(const Kernel& K, size_t from, const Idx& idx, std::string* code) {
  std::string stores;
  size_t i = from;
  for (; i < K.ops.size(); ++i) {
    ValueId v = K.ops[i];
    const Node& n = g_.node(v);
    if (n.def().fuse == Fuse::store) break;
    if (n.type.shape != K.space) throw Error("code generation: op outside the kernel's iteration space");
    std::string var = "v" + std::to_string(v);
    *code += "  const " + CT(v) + " " + var + " = " + elementwise_or_gather(n, idx) + ";\n";
    // Stored after every op has read its operands: a result planned in place
    // of an input must not overwrite the element before then.
    if (in_mem_[static_cast<size_t>(v)] || is_temp(v)) stores += "  " + ptr(v) + "[" + flat(idx, K.space) + "] = " + stored(v, var) + ";\n";
    local_[v] = var;
  }
  *code += stores;
  return i;
}

void Emitter::pointwise(const Kernel& K, size_t first) {
  Idx iv = loop_vars(K.space.size());
  for (size_t i = first; i < K.ops.size();) {
    if (g_.node(K.ops[i]).def().fuse == Fuse::store) {
      store(K.ops[i++]);
      continue;
    }
    local_.clear();
    std::string body = element(K.space, iv);
    i = segment(K, i, iv, &body);
    launch(&prog_.launches, "pointwise", body, count(K.space));
    local_.clear();
  }
}

void Emitter::store(ValueId v) {
  const Node& n = g_.node(v);
  local_.clear();
  if (n.op == Op::concat) {  // a launch per input
    for (const ConcatPart& c : concat_parts(v))
      launch(&prog_.launches, "concat",
             element(shape(c.input), c.at) + "  " + ptr(v) + "[" + flat(c.into, shape(v)) + "] = " + stored(v, load(c.input, c.at)) + ";\n",
             count(shape(c.input)));
    return;
  }
  auto so = shape(v);
  Idx all = loop_vars(so.size(), "c");
  const bool copies = n.op == Op::scatter_add || !s_.writes_in_place(v);
  if (copies)  // the base, or the cache when it is not written in place
    launch(&prog_.launches, "copy", element(so, all) + "  " + ptr(v) + "[" + flat(all, so) + "] = " + stored(v, load(n.inputs[0], all)) + ";\n",
           count(so));
  if (n.op == Op::scatter_add) {
    // A work-item per (slice before the axis, column after it): each
    // element's updates added in the indices' order, as the interpreter's.
    const size_t axis = static_cast<size_t>(n.attr_int("axis"));
    auto si = shape(n.inputs[1]);
    const Sizes before(so.begin(), so.begin() + static_cast<std::ptrdiff_t>(axis)), after(so.begin() + static_cast<std::ptrdiff_t>(axis) + 1, so.end());
    const Dim P = count(before), L = so[axis], N = count(si), S = count(after);
    Idx upd = unflat("p", before), in = unflat("k", si), col = unflat("s", after);
    upd.insert(upd.end(), in.begin(), in.end());
    upd.insert(upd.end(), col.begin(), col.end());
    std::string body = "  if (tj_gid >= " + C(P * S) + ") return;\n  const int64_t p = tj_gid / " + C(S) + ", s = tj_gid % " + C(S) + ";\n";
    body += "  for (int64_t k = 0; k < " + C(N) + "; ++k) {\n";
    body += "    const int64_t i = tj_index((int64_t)(" + load(n.inputs[1], in) + "), " + C(L) + ");\n";
    const std::string at = ptr(v) + "[(p*" + C(L) + " + i)*" + C(S) + " + s]";
    std::string old = is_narrow_float(g_.type(v).dtype) ? read_narrow(g_.type(v).dtype, at) : at;
    body += "    " + at + " = " + stored(v, rounded("(" + CT(v) + ")" + old + " + " + load(n.inputs[2], upd), g_.type(v).dtype)) + ";\n  }\n";
    launch(&prog_.launches, "scatter_add", body, P * S);
    return;
  }
  // kv_write: the rows at pos; a position outside the cache writes nothing.
  ValueId rows = n.inputs[1];
  auto sr = shape(rows);
  size_t axis = static_cast<size_t>(n.attr_int("axis"));
  Idx iv = loop_vars(sr.size(), "c");
  Idx ci = iv;
  ci[axis] = "(" + iv[axis] + "+pos)";
  std::string body = "  const int64_t pos = (int64_t)(" + load(n.inputs[2], {}) + ");\n";
  body += "  if (pos < 0 || pos + " + C(sr[axis]) + " > " + C(so[axis]) + ") { if (tj_gid == 0) tj_fail(tj_status, tj_status_kv_write_outside); return; }\n";
  body += element(sr, iv) + "  " + ptr(v) + "[" + flat(ci, so) + "] = " + stored(v, load(rows, iv)) + ";\n";
  launch(&prog_.launches, "kv_write", body, count(sr));
}

}  // namespace tj::gpu
