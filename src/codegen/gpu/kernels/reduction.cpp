// The GPU emitter's reduction kernels: a work-item per output element,
// accumulating its inputs in order (floats in double, integers in int64).
#include "codegen/gpu/emitter.h"

#include "tensorjit/error.h"

namespace tj::gpu {

void Emitter::reduction(const Kernel& K) {
  if (K.ops.size() != 1) throw Error("code generation: a reduction kernel with more than one op");
  ValueId v = K.ops[0];
  const Node& n = g_.node(v);
  ValueId x = n.inputs[0];
  auto sx = shape(x);
  const auto& axes = n.attr_ints("axes");
  Sizes kept, reduced;  // the dims each output element has, and those it sums over
  for (size_t d = 0; d < sx.size(); ++d)
    (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end() ? reduced : kept).push_back(sx[d]);
  const Dim outn = count(kept), per = count(reduced);
  Idx ko = unflat("tj_gid", kept), ri = unflat("r", reduced), iv;
  for (size_t d = 0, k = 0, r = 0; d < sx.size(); ++d)
    iv.push_back(std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end() ? ri[r++] : ko[k++]);
  Accumulator A = accumulator(n);
  const std::string ty = CT(v);
  std::string code = "  if (tj_gid >= " + C(outn) + ") return;\n  " + A.type + " acc = " + A.init + ";\n";
  code += "  for (int64_t r = 0; r < " + C(per) + "; ++r) acc = " + update(A, "acc", load(x, iv)) + ";\n";
  code += "  " + ptr(v) + "[tj_gid] = " +
          stored(v, rounded("(" + ty + ")(acc" + (n.op == Op::mean ? " / (double)" + C(per) : std::string()) + ")", n.type.dtype)) +
          ";\n";
  launch(&prog_.launches, "reduction", code, outn);
}

}  // namespace tj::gpu
