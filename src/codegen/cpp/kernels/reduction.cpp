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
  // Accumulators live in the (first thread's) scratch: no allocation per call.
  (void)scratch(outn * 8 + 8);
  Accumulator A = accumulator(n);
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
