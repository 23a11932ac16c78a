// The GPU emitter's convolutions and max pools (KernelKind::conv and pool;
// the ops' rows are ir/ops/conv.cpp and ir/ops/pool.cpp), in either layout,
// over any number of spatial dims, read through any view of their operands
// (packed weights included; a Winograd conv's fourth input is not read).
//
// A convolution is an implicit GEMM per (image, group): rows are the output
// positions, columns the group's output channels, and the depth its input
// channels times the kernel offsets, in the reference's order (input
// channel, then offset, row-major). Each 16x16 tile of the output is a
// work-group that stages 16-deep slices of the windows (zeros in the
// padding, made as they are read) and of the weights through work-group
// memory, as the matmul kernel does; then the bias and the epilogue in
// registers. A pool is a work-item per output element over the taps inside
// the input in row-major order: the IEEE maximum (the padding's -inf never
// wins), or the sum from -0 with one +0 added where the window holds a pad
// (the reference's sum, bit for bit: codegen/cpp/kernels/pool.cpp).
#include "codegen/gpu/emitter.h"

#include "tensorjit/error.h"

namespace tj::gpu {

namespace {

// The spatial dims of a value in its layout ([N, C, d..] or [N, d.., C]).
Sizes spatial(const Sizes& s, bool last) { return Sizes(s.begin() + (last ? 1 : 2), s.end() - (last ? 1 : 0)); }

// The index of (batch, channel, spatial..) in a value of that layout.
Idx in_layout(const std::string& b, const std::string& c, const Idx& at, bool last) {
  Idx r{b};
  if (!last) r.push_back(c);
  r.insert(r.end(), at.begin(), at.end());
  if (last) r.push_back(c);
  return r;
}

// Declarations of the input position of each spatial dim read by offset
// `t` at output position `o` (pos<d>), and the condition that all lie
// inside the input.
std::string window_position(const Node& n, const Sizes& in, const Idx& o, const Idx& t, std::string* inside) {
  const auto &stride = n.attr_ints("stride"), &pad = n.attr_ints("pad_begin"), &dil = n.attr_ints("dilation");
  std::string code;
  *inside = "1";
  for (size_t d = 0; d < in.size(); ++d) {
    const std::string p = "pos" + std::to_string(d);
    code += "const int64_t " + p + " = (" + o[d] + ")*" + std::to_string(stride[d]) + " - " + std::to_string(pad[d]) + " + (" + t[d] + ")*" +
            std::to_string(dil[d]) + "; ";
    *inside += " && " + p + " >= 0 && " + p + " < " + C(in[d]);
  }
  return code;
}

Idx positions(size_t k) { return loop_vars(k, "pos"); }

}  // namespace

void Emitter::conv(const Kernel& K) {
  const ValueId cv = K.ops[0];
  const Node& n = g_.node(cv);
  const ValueId x = n.inputs[0], w = n.inputs[1];
  const bool last = n.attr_bool("channels_last"), bias = n.inputs.size() > 2;
  const auto so = shape(cv), sx = shape(x), sw = shape(w);
  const Sizes os = spatial(so, last), is = spatial(sx, last), ks(sw.begin() + 2, sw.end());
  const int64_t G = n.attr_int("groups"), M = sw[0].value(), Cg = sw[1].value(), Mg = M / G;
  const Dim P = count(os), taps = count(ks), Kd = Dim(Cg) * taps, batch = so[0] * Dim(G);
  const std::string acc_t = n.type.dtype == DType::f64 ? "double" : "float", TS = std::to_string(kTile);
  const std::string tiles_m = "((" + C(P) + " + " + TS + " - 1) / " + TS + ")", tiles_n = "((" + C(Dim(Mg)) + " + " + TS + " - 1) / " + TS + ")";
  std::string code = "  const int64_t tn = tj_grp % " + tiles_n + ", tm = tj_grp / " + tiles_n + " % " + tiles_m + ", bt = tj_grp / " + tiles_n +
                     " / " + tiles_m + ";\n";
  code += "  const int64_t b = bt / " + std::to_string(G) + ", g = bt % " + std::to_string(G) + ";\n";
  code += "  const int tx = tj_lid % " + TS + ", ty = tj_lid / " + TS + ";\n";
  // This work-item's output position (row p) and channel of the group (column j).
  code += "  const int64_t p = tm * " + TS + " + ty, j = tn * " + TS + " + tx;\n";
  const Idx o = loop_vars(os.size(), "q"), at = unflat("p", os);
  for (size_t d = 0; d < os.size(); ++d) code += "  const int64_t " + o[d] + " = " + at[d] + ";\n";
  code += "  " + acc_t + " acc = 0;\n";
  code += "  for (int64_t k0 = 0; k0 < " + C(Kd) + "; k0 += " + TS + ") {\n";
  // The windows' slice: row p, depth k = (input channel, offset); zero in the padding.
  std::string inside;
  const std::string where = window_position(n, is, o, unflat("(k % " + C(taps) + ")", ks), &inside);
  code += "    { const int64_t k = k0 + tx; " + acc_t + " a = 0;\n";
  code += "      if (p < " + C(P) + " && k < " + C(Kd) + ") { " + where + "\n";
  code += "        if (" + inside + ") a = (" + acc_t + ")(" + load(x, in_layout("b", "(g*" + std::to_string(Cg) + " + k / " + C(taps) + ")", positions(is.size()), last)) +
          "); }\n";
  code += "      tj_a[tj_lid] = a; }\n";
  // The weights' slice: depth k, column j.
  Idx wi{"(g*" + std::to_string(Mg) + " + j)", "(k / " + C(taps) + ")"};
  for (const std::string& t : unflat("(k % " + C(taps) + ")", ks)) wi.push_back(t);
  code += "    { const int64_t k = k0 + ty; tj_b[tj_lid] = k < " + C(Kd) + " && j < " + std::to_string(Mg) + " ? (" + acc_t + ")(" + load(w, wi) +
          ") : 0; }\n";
  code += "    tj_barrier();\n    for (int kk = 0; kk < " + TS + "; ++kk) acc += tj_a[ty * " + TS + " + kk] * tj_b[kk * " + TS + " + tx];\n";
  code += "    tj_barrier();\n  }\n";
  code += "  if (p >= " + C(P) + " || j >= " + std::to_string(Mg) + ") return;\n";
  const std::string m = "(g*" + std::to_string(Mg) + " + j)";
  if (bias) code += "  acc += (" + acc_t + ")(" + load(n.inputs[2], {m}) + ");\n";
  // The convolution and its epilogue at its output element.
  const size_t rest = product_value(K, "acc", in_layout("b", m, o, last), &code);
  // Work-groups: (images x groups) x tiles of positions x tiles of channels.
  launch(&prog_.launches, "conv", code, batch * Dim(kTile * kTile), kTile * kTile,
         {acc_t + " tj_a[" + std::to_string(kTile * kTile) + "]", acc_t + " tj_b[" + std::to_string(kTile * kTile) + "]"}, {},
         {{P, kTile}, {Dim(Mg), kTile}});
  local_.clear();
  if (rest < K.ops.size()) pointwise(K, rest);
}

void Emitter::pool(const Kernel& K) {
  const ValueId pv = K.ops[0];
  const Node& n = g_.node(pv);
  const bool sum = n.op == Op::sum_pool;
  const ValueId x = n.inputs[0];
  const bool last = n.attr_bool("channels_last");
  const auto so = shape(pv), sx = shape(x);
  const Sizes os = spatial(so, last), is = spatial(sx, last);
  const auto& ker = n.attr_ints("kernel");
  const Sizes ks(ker.begin(), ker.end());
  Idx iv = loop_vars(so.size());
  std::string code = element(so, iv);
  const std::string b = iv[0], c = last ? iv.back() : iv[1];
  const Idx o(iv.begin() + (last ? 1 : 2), iv.end() - (last ? 1 : 0));
  const std::string var = "v" + std::to_string(pv), ty = CT(pv);
  code += "  " + ty + " " + var + " = " + (sum ? "-0.0;\n  int pads = 0" : "-INFINITY") + ";\n";
  code += "  for (int64_t t = 0; t < " + C(count(ks)) + "; ++t) {\n";
  std::string inside;
  code += "    " + window_position(n, is, o, unflat("t", ks), &inside) + "\n";
  const std::string xv = "(" + ty + ")(" + load(x, in_layout(b, c, positions(is.size()), last)) + ")";
  code += "    if (" + inside + ") " + var + " = " + (sum ? var + " + " + xv + ";\n    else pads = 1" : "tj_max_" + ty + "(" + var + ", " + xv + ")") + ";\n  }\n";
  if (sum) code += "  if (pads) " + var + " = " + var + " + (" + ty + ")0;\n";
  local_.clear();
  local_[pv] = var;
  if (in_mem_[static_cast<size_t>(pv)] || is_temp(pv)) code += "  " + ptr(pv) + "[" + flat(iv, so) + "] = " + stored(pv, var) + ";\n";
  const size_t rest = segment(K, 1, iv, &code);
  launch(&prog_.launches, n.def().name, code, count(so));
  local_.clear();
  if (rest < K.ops.size()) pointwise(K, rest);
}

}  // namespace tj::gpu
