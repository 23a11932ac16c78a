// The C++ emitter's reduction kernels: a loop over the input accumulating into
// the output.
#include "codegen/cpp/emitter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "tensorjit/error.h"

namespace tj::cpp {

// A reduction over any axes: accumulate every input element into its output.
// Where each output sums few elements (at most kFewReduced: split attention's
// radix sum, a [1, 2, C, H, W] over its 2) or a contiguous run of them (the
// innermost axis reduced), one output at a time, its elements in row-major
// order of the reduced axes, the outputs split over the pool; otherwise one
// pass over the input in its row-major order into per-output accumulators.
// Each output takes its elements in the same order either way: the same bits.
std::string Emitter::reduction_body(const Kernel& K) {
  if (K.ops.size() != 1) throw Error("code generation: a reduction kernel with more than one op");
  ValueId v = K.ops[0];
  const Node& n = g_.node(v);
  ValueId x = n.inputs[0];
  auto sx = shape(x);
  const auto& axes = n.attr_ints("axes");
  Sizes kept = sx;
  for (int64_t a : axes) kept[static_cast<size_t>(a)] = 1;
  Dim outn = count(kept), per = div(count(sx), outn);
  std::string ty = CT(v);  // stored through its 16-bit type's conversion for f16/bf16
  Accumulator A = accumulator(n);
  const bool inner_reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(sx.size()) - 1) != axes.end();
  constexpr int64_t kFewReduced = 64;
  if (!axes.empty() && hint(outn) > 1 && (hint(per) <= kFewReduced || inner_reduced)) {
    Sizes ks, rs;  // the kept and the reduced dims, each in order
    Idx kv, rv, iv(sx.size());
    for (size_t d = 0; d < sx.size(); ++d) {
      const bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
      const std::string var = (reduced ? "r" : "k") + std::to_string(d);
      (reduced ? rs : ks).push_back(sx[d]);
      (reduced ? rv : kv).push_back(var);
      iv[d] = var;
    }
    Idx ko = iv;
    for (int64_t a : axes) ko[static_cast<size_t>(a)] = "0";
    const std::string one = "  tj_acc = " + A.update("tj_acc", load(x, iv)) + ";\n";
    const std::string body = "  " + A.type + " tj_acc = " + A.init + ";\n" + loops(rs, rv, one, false, false) + "  " + ptr(v) + "[" + flat(ko, kept) +
                             "] = (" + ty + ")(tj_acc" + (n.op == Op::mean ? " / (double)" + C(per) : "") + ");\n";
    return loops(ks, kv, body, hint(count(sx)) >= kParallelElements, false);
  }
  // Accumulators live in the (first thread's) scratch: no allocation per call.
  (void)scratch(outn * 8 + 8);
  std::string code = "  " + A.type + "* acc = (" + A.type + "*)" + slot(tj_slot_scratch) + ";\n";
  code += "  for (int64_t o = 0; o < " + C(outn) + "; ++o) acc[o] = " + A.init + ";\n";
  Idx iv = loop_vars(sx.size());
  Idx ko = iv;
  for (int64_t a : axes) ko[static_cast<size_t>(a)] = "0";
  std::string slot = "acc[" + flat(ko, kept) + "]";
  std::string upd = slot + " = " + A.update(slot, load(x, iv)) + ";\n";
  code += loops(sx, iv, "  " + upd, false);
  code += "  for (int64_t o = 0; o < " + C(outn) + "; ++o) " + ptr(v) + "[o] = (" + ty + ")(acc[o]" +
          (n.op == Op::mean ? " / (double)" + C(per) : "") + ");\n";
  return code;
}

}  // namespace tj::cpp
