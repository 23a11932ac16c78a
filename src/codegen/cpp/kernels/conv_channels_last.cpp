// The C++ emitter's channels-last convolution kernels (conv's channels_last
// form, chosen by passes/assign_layouts.cpp; KernelKind::conv), beside the
// channels-first ones of conv.cpp; the helpers they call are in
// conv_channels_last_helpers.cpp.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>

#include "codegen/c_text.h"
#include "codegen/cpp/emitter.h"
#include "codegen/cpp/kernels/conv_common.h"
#include "codegen/cpp/kernels/conv_epilogues.h"
#include "ir/layout.h"
#include "ir/ops/windows.h"
#include "ir/rewriter.h"
#include "tensorjit/error.h"

namespace tj::cpp {

using namespace conv_kernels;

// Channels last (x [N, d.., C], y [N, o.., M]), f32, at most 2 spatial
// dims, weights packed (pack_conv_weights): the input copied once with its
// zero padding into scratch [Hp, Wp, C]; then either the direct form's
// tiles of 7 positions by 64 channels (fewer channels: more positions,
// by_channel_quads), stored as whole vectors of the positions' channels (no
// transposition), or, depthwise, each output
// position's channels as vectors (tj_dw_cl). The epilogue runs with the
// channels innermost: after each tile, from its sums in L1 (tj_tile), in the
// direct forms; over each part's positions at its end, depthwise.
std::string Emitter::conv_channels_last_body(const Kernel& K) {
  const ValueId cv = K.ops[0];
  const Node& n = g_.node(cv);
  const auto sx = shape(n.inputs[0]), sw = shape(n.inputs[1]), so = shape(cv);
  const size_t k = sw.size() - 2;
  const int64_t G = n.attr_int("groups"), C_ = sx.back().value(), M = sw[0].value(), Cg = sw[1].value();
  // The direct form's tiles over blocks of `lanes` output channels: one
  // group, or groups of 16 outputs and more (each block inside a group,
  // reading the group's Cg input channels).
  const int64_t lanes = conv_quad_lanes(sw, G);
  const bool dense = lanes > 0;
  const ValueId packed = dense ? packed_conv_quads(g_, n.inputs[1], lanes) : packed_conv_taps(g_, n.inputs[1]);
  if (T(cv) != "float" || k > 2 || packed < 0) throw Error("code generation: a channels-last conv of this form (the driver lowers it to windows)");
  std::vector<int64_t> in, ker, out;
  for (size_t i = 0; i < k; ++i) in.push_back(sx[i + 1].value()), ker.push_back(sw[i + 2].value()), out.push_back(so[i + 1].value());
  Plane pl(in, ker, out, n.attr_ints("stride"), n.attr_ints("pad_begin"), n.attr_ints("dilation"));
  const bool wino = n.attr_bool("winograd");
  // Winograd F(wm x wm, 3x3), wm = 2 or 4 (u's 16 or 36 points): wm x wm
  // output tiles (TH x TW of them), each reading a wa x wa patch of the
  // padded input from (wm th, wm tw): the plane padded to wm TH + 2 by
  // wm TW + 2.
  const int64_t wm = wino && shape(n.inputs[3])[1] == Dim(36) ? 4 : 2, wa = wm + 2, points = wa * wa;
  const int64_t TH = (pl.OH + wm - 1) / wm, TW = (pl.OW + wm - 1) / wm;
  if (wino) pl.Hp = std::max(pl.Hp, wm * TH + 2), pl.Wp = std::max(pl.Wp, wm * TW + 2);
  const int64_t OW = pl.OW, P = pl.OH * OW, Sz = pl.H * pl.W;
  std::string code;
  // An input that is a strided view (the NCHW image a channels-last net
  // starts from, transposed) goes into the padded copy from where it lies,
  // rather than through a dense copy of its own first.
  std::optional<Strided> view;
  if (auto st = strided(n.inputs[0]); dense && pl.padded() && st && st->strides != contiguous_strides(sx)) view = st;
  const std::string X = view ? "" : dense_operand(n.inputs[0], &code), B = n.inputs.size() > 2 ? dense_operand(n.inputs[2], &code) : "";
  const std::string Nn = C(so[0]), Y = ptr(cv), Wp_ = ptr(packed);
  const bool epilogue = !B.empty() || K.ops.size() > 1;
  const RegisterEpilogue rep = epilogue ? register_epilogue(g_, K, cv, !B.empty()) : RegisterEpilogue{};
  // The tile's trailing arguments and output for a register epilogue.
  const std::string rep_args = rep.bits ? ", " + (B.empty() ? std::string("nullptr") : B + " + m0") + ", " + codegen::literal(rep.lo, DType::f32) + ", " +
                                                    codegen::literal(rep.hi, DType::f32) : "";
  const std::string rep_out = rep.bits ? ptr(rep.out) : "";
  // Sums and means over every position (FusionOptions::conv_reductions:
  // global average pooling, a squeeze-excitation's squeeze), added up in
  // the epilogue. Each part adds its positions' values, in their order,
  // into its block of positions' row of tj_red, [sums][rows][M] doubles
  // after the threads' scratch; after the parts each sum adds its rows in
  // order. The rows are the form's blocks of positions (red_row of
  // red_rows), not the threads, so the results do not depend on the thread
  // count. Their register epilogues are off (register_epilogue: more ops).
  std::vector<ValueId> pos_sums;
  for (size_t i = 1; i < K.ops.size(); ++i)
    if (sums_in_epilogue(g_, K, K.ops[i])) pos_sums.push_back(K.ops[i]);
  // The matrix library's convolution (oneDNN), for any groups the kernels take,
  // weights stored for the program's lifetime, and at most the bias and a
  // ReLU or clip (the library's): by rule for a 1x1 conv that expands few
  // input channels six-fold and more (mobilenet_v2's 16 -> 96 at 112x112,
  // 24 -> 144, 32 -> 192: its kernels 13-17% faster there, measured in the
  // program; ours won at 3x, and from 64 input channels on); without
  // AVX-512 (wide_vectors), by rule for every one-group 1x1 conv of stride
  // 1, every stem (at most 4 input channels) and every strided one-group
  // conv with output rows of 14 or fewer: there the tuner chose oneDNN for
  // 20 of resnet50's 24 and 8 of mobilenet_v2's 13 tunable convs, 5-40%
  // faster on the 1x1s, 1.4-2.2x on the stems, 1.01-1.48x on 3x3 stride-2
  // convs to 14x14 and 7x7 (ours won to 28x28: 2312 against 2525 us) (Zen 3,
  // AVX2); a tuning candidate beside the generated form for the rest.
  // Its epilogue may also add a residual (ResNet's 1x1 convs that end a
  // block, with the shortcut and the ReLU after it).
  const RegisterEpilogue lep = epilogue ? library_epilogue(g_, K, cv, !B.empty(), rep) : rep;
  if (auto d = library_conv_desc(K, pl, view, lep.bits, lep.lo, lep.hi, lep.residual >= 0)) {
    const bool one_by_one = G == 1 && pl.KH * pl.KW == 1 && pl.SH == 1 && pl.SW == 1 && !pl.padded();
    // With a residual (a binary post-op), only stride-1 1x1 convs of 14x14
    // positions and more: there oneDNN's 1x1 kernel won by 5-9% (resnet50's
    // 56x56 64 -> 256 1355 against 1486 us); the post-op sends a strided
    // 1x1 to its generic direct kernel (resnet50's stride-2 downsamples
    // 1.5-3.2x slower: 28x28 512 -> 1024 6955 against 2156 us), and at 7x7
    // 512 -> 2048 ours won (823 against 1005-1816 us) (the tuner, Zen 3).
    const bool residual_rule = lep.residual < 0 || (one_by_one && P >= 196);
    const bool narrow_rule = G == 1 && residual_rule && (one_by_one || C_ <= 4 || ((pl.SH > 1 || pl.SW > 1) && pl.OW <= 14));
    // TJ_CONV_FORMS=generated: no rule takes the library (the conv tests
    // of the generated forms, on any CPU); the tuner still times both.
    const char* forms = std::getenv("TJ_CONV_FORMS");
    const bool rules = !(forms && std::string(forms) == "generated");
    // Groups whose width does not divide the generated code's vector
    // (regnet_y_1_6gf's 24 channels): the generated form goes one channel
    // at a time; oneDNN's brgconv ran those 1.4-1.6x faster than the window
    // form they took before (Zen 4).
    const bool scalar_groups = grouped_by_library(sw, G, generated_vector_floats());
    const bool rule = rules && ((one_by_one && C_ <= 32 && M >= 6 * C_) || (!wide_vectors() && narrow_rule) || scalar_groups);
    if (tune_ && knobs_.label.empty()) {
      for (bool library : {rule, !rule}) {
        alternatives_.push_back(Knobs{});
        alternatives_.back().label = library ? "oneDNN" : "generated", alternatives_.back().conv_library = library;
      }
      tuning_signature_ = "conv " + shape_str(sx) + " * " + shape_str(sw) + " -> " + shape_str(so) + " stride " + S(pl.SH) + "," + S(pl.SW) + " pad " +
                          S(pl.PH) + "," + S(pl.PW) + " dilation " + S(d->DH) + "," + S(d->DW) + " x strides " + S(d->xs[0]) + "," + S(d->xs[1]) + "," +
                          S(d->xs[2]) + "," + S(d->xs[3]) + " epilogue " + std::to_string(lep.bits) + (lep.residual >= 0 ? " residual " : " ") + codegen::literal(d->lo, DType::f32) + "," +
                          codegen::literal(d->hi, DType::f32);
    }
    if (knobs_.label.empty() ? rule : knobs_.conv_library) {
      const std::string x = view ? ptr(view->base) + " + " + C(view->offset) : X;
      // The generated form too, for where the library has no fast kernel
      // (another CPU; TJ_LIBRARY_CONV=off).
      const Knobs was = knobs_;
      knobs_ = {};
      knobs_.label = "generated";
      const std::string otherwise = conv_channels_last_body(K);
      knobs_ = was;
      const std::string R = lep.residual >= 0 ? dense_operand(lep.residual, &code) : "";
      return code + conv_library_call(*d, x, Wp_, B, R, lep.bits || lep.residual >= 0 ? ptr(lep.out) : Y, otherwise);
    }
  }
  std::string red_row;
  int64_t red_rows = 0;
  const size_t scratch_before = out_.scratch_sizes.size();
  // Before a form's parts (per image): its rows, and their sums zeroed.
  auto open_sums = [&](const std::string& row, int64_t rows) {
    red_row = row, red_rows = rows;
    if (pos_sums.empty()) return std::string();
    return "    for (int64_t i = 0; i < " + S(static_cast<int64_t>(pos_sums.size()) * rows * M) + "; ++i) tj_red[i] = 0;\n";
  };
  // After them: each sum's rows added up into its output.
  auto close_sums = [&] {
    std::string c;
    for (size_t j = 0; j < pos_sums.size(); ++j) {
      const std::string mean = g_.node(pos_sums[j]).op == Op::mean ? " / (double)" + S(P) : "";
      c += "    for (int64_t mc = 0; mc < " + S(M) + "; ++mc) {\n      double s = 0;\n      for (int64_t r = 0; r < " + S(red_rows) + "; ++r) s += tj_red[(" +
           S(static_cast<int64_t>(j) * red_rows) + " + r)*" + S(M) + " + mc];\n      " + ptr(pos_sums[j]) + "[b*" + S(M) + " + mc] = (float)(s" + mean + ");\n    }\n";
    }
    return c;
  };
  // The body, with tj_red declared: past each thread's scratch of the
  // form's own (thread k's at k times its size, if any).
  auto with_sums = [&](const std::string& body) {
    if (pos_sums.empty()) return body;
    int64_t per_thread = 0;
    if (out_.scratch_sizes.size() > scratch_before) per_thread = (out_.scratch_sizes.back().value() + 63) / 64 * 64;
    else scratch(Dim(0));
    out_.scratch_sizes.back() = Dim(per_thread + static_cast<int64_t>(pos_sums.size()) * red_rows * M * 8);
    return "  double* const tj_red = (double*)((char*)" + slot(tj_slot_scratch) + " + tj_threads(" + pool() + ")*" + S(per_thread) + ");\n" + body;
  };
  // A direct tile's call up to its "(": tj_conv_tile_cl<NP, NV, KH, KW>,
  // with ACC, WS and EP where any differs from the defaults.
  // KWW: the weights' taps per kernel row, where the tile takes kw of them (0: kw).
  auto tile_head = [](int64_t np, int nv, int64_t kh, int64_t kw, bool acc, int64_t ws, int ep, int64_t kww = 0) {
    std::string h = "tj_conv_tile_cl<" + S(np) + ", " + std::to_string(nv) + ", " + S(kh) + ", " + S(kw);
    const bool narrower = kww > 0 && kww != kw;
    if (acc || ws != 64 || ep || narrower) h += std::string(acc ? ", true" : ", false") + ", " + S(ws);
    if (ep || narrower) h += ", " + std::to_string(ep);
    if (narrower) h += ", " + S(kww);
    return h + ">(";
  };
  // With an epilogue, a one-group tile stores its sums into tj_tile, a
  // buffer of kTileFloats in L1 (64 floats a position), and the epilogue
  // reads them there, storing them to y only where the conv's value is one
  // of the kernel's outputs: otherwise the sums never reach memory
  // (efficientnet_b0's 112x112 16->96 conv with SiLU wrote 4.8 MB of sums
  // and read them back: 500 -> 447 us). The epilogue covers each tile's new
  // positions only, once each, so tiles may overlap.
  // The epilogue over channels [m0, m1) at output positions [q0, q1) of
  // image b; with `t0`, the sums from tj_tile, whose first position is t0
  // and whose positions are `ts` floats apart.
  auto epilogue_over = [&](const std::string& m0, const std::string& m1, const std::string& q0, const std::string& q1, const std::string& t0 = "",
                           int64_t ts = 64) {
    if (!epilogue) return std::string();
    Idx iv{"b"};
    std::string open = "      for (int64_t q = " + q0 + "; q < " + q1 + "; ++q) {\n";
    if (k == 2) open += "        const int64_t o0 = q / " + S(OW) + ", ow = q % " + S(OW) + ";\n", iv.push_back("o0");
    else open += "        const int64_t ow = q;\n";
    iv.push_back("ow"), iv.push_back("mc");
    open += "#pragma omp simd\n        for (int64_t mc = " + m0 + "; mc < " + m1 + "; ++mc) {\n";
    local_.clear();
    std::string body;
    const std::string at = "((b*" + S(P) + " + q)*" + S(M) + " + mc)";
    const std::string sums = t0.empty() ? Y + "[" + at + "]" : "tj_tile[(q - " + t0 + ")*" + S(ts) + " + (mc - " + m0 + ")]";
    if (!B.empty() || !t0.empty()) {
      body += "          const float v" + S(cv) + " = " + sums + (B.empty() ? "" : " + " + B + "[mc]") + ";\n";
      if (K.writes(cv)) body += "          " + Y + "[" + at + "] = v" + S(cv) + ";\n";
      local_[cv] = "v" + S(cv);
    }
    body += pointwise_statements(K, 1, iv, so, "          ");
    // The sums over these positions, in float (tj_s<j>, a tile's few
    // positions; a part's, in the Winograd form and a depthwise epilogue
    // from y), then into the part's row of tj_red, in double.
    std::string before, after;
    for (size_t j = 0; j < pos_sums.size(); ++j) {
      const ValueId o = summed_value(g_, pos_sums[j]);
      const auto l = local_.find(o);
      const std::string sj = "tj_s" + std::to_string(j);
      before += "      float " + sj + "[" + S(M) + "];\n      for (int64_t mc = " + m0 + "; mc < " + m1 + "; ++mc) " + sj + "[mc] = 0;\n";
      body += "          " + sj + "[mc] += " + (l != local_.end() ? l->second : load(o, iv)) + ";\n";
      after += "      for (int64_t mc = " + m0 + "; mc < " + m1 + "; ++mc) tj_red[(" + S(static_cast<int64_t>(j) * red_rows) + " + " + red_row + ")*" + S(M) +
               " + mc] += " + sj + "[mc];\n";
    }
    local_.clear();
    return before + open + body + "        }\n      }\n" + after;
  };
  uses_direct_conv_ = true;
  const int64_t Hp = pl.Hp, Wp = pl.Wp, row = (dense ? Wp : pl.W) * C_;
  // The 1x1 form (stride 1, no padding): its positions are one run. Its
  // input channels are a value read at run time (lift): 1x1 convs that
  // differ only in them (densenet's, after each concat) share one function.
  const bool flat = !wino && G == 1 && pl.KH * pl.KW == 1 && pl.SH == 1 && pl.SW == 1 && !pl.padded() && P >= 2 * kTilePositions;
  const std::string Cx = flat ? lift(C_) : S(C_);
  // Rows whose windows reach the image through only some of the kernel's
  // rows (a dilated conv over a small map: DeepLabV3's dilation 12 over
  // 14x14 reads one kernel row in 10 of 14 output rows) take a tile of
  // those rows alone, [kh0, kh1): x and the weights start at row kh0,
  // the rows in the padding are not multiplied. Where at least a quarter
  // of the rows' taps lie in the padding (not a 3x3's border rows), one
  // instantiation per count of rows that occurs. The padded copy's rows
  // above and below the image are then never read: not zeroed either (5.5 MB
  // a call for DeepLabV3's dilation 12 over 960 channels).
  std::set<int64_t> row_counts;  // the counts of kernel rows inside, below KH
  int64_t dead = 0;
  bool empty_row = false;
  for (int64_t oh = 0; oh < pl.OH; ++oh) {
    const int64_t live = windows::live_taps(oh, oh + 1, pl.SH, pl.PH, pl.DH, pl.KH, pl.H).size();
    empty_row |= live == 0;
    dead += pl.KH - live;
    if (live < pl.KH) row_counts.insert(live);
  }
  const bool trim_rows = dense && !wino && !flat && !empty_row && 4 * dead >= pl.OH * pl.KH;
  code += "  for (int64_t b = 0; b < " + Nn + "; ++b) {\n";
  if (!view) code += "    const float* xb = " + X + " + b*" + (flat ? S(Sz) + "*" + Cx : S(Sz * C_)) + ";\n";
  if (dense && pl.padded()) {
    // The image with its zero padding: border rows zeroed, then each image
    // row with its left and right pads (separate loops: see Plane::copy).
    scratch(Dim(0));
    out_.scratch_sizes.back() = Dim(Hp * row * 4);
    code += "    float* xpad = (float*)" + slot(tj_slot_scratch) + ";\n";
    if (pl.PH > 0 && !trim_rows) code += "    for (int64_t i = 0; i < " + S(pl.PH * row) + "; ++i) xpad[i] = 0;\n";
    if (Hp > pl.PH + pl.H && !trim_rows) code += "    for (int64_t i = " + S((pl.PH + pl.H) * row) + "; i < " + S(Hp * row) + "; ++i) xpad[i] = 0;\n";
    code += "    " + open_parallel(S(pl.H));
    code += "      float* d = xpad + (tj_part + " + S(pl.PH) + ")*" + S(row) + ";\n";
    if (pl.PW > 0) code += "      for (int64_t i = 0; i < " + S(pl.PW * C_) + "; ++i) d[i] = 0;\n";
    if (view) {  // x [N, (H,) W, C] at its strides
      const Sizes& st = view->strides;
      code += "      const float* s = " + ptr(view->base) + " + " + C(view->offset) + " + b*" + C(st[0]) + (k == 2 ? " + tj_part*" + C(st[1]) : "") + ";\n";
      code += "      for (int64_t w = 0; w < " + S(pl.W) + "; ++w)\n        for (int64_t c = 0; c < " + S(C_) + "; ++c) d[" + S(pl.PW * C_) + " + w*" + S(C_) +
              " + c] = s[w*" + C(st[k]) + " + c*" + C(st[k + 1]) + "];\n";
    } else {
      code += "      const float* s = xb + tj_part*" + S(pl.W * C_) + ";\n";
      code += "      for (int64_t i = 0; i < " + S(pl.W * C_) + "; ++i) d[" + S(pl.PW * C_) + " + i] = s[i];\n";
    }
    if (Wp > pl.PW + pl.W) code += "      for (int64_t i = " + S((pl.PW + pl.W) * C_) + "; i < " + S(row) + "; ++i) d[i] = 0;\n";
    code += "    " + close_parallel();
  } else {
    code += "    const float* xpad = xb;\n";  // no padding (1x1), or depthwise: its taps skip the border
  }
  if (wino) {
    // Winograd F(wm x wm, 3x3) (u: passes/winograd_weights.cpp). Parts of
    // whole tile rows by 64 output channels, about kWinogradTiles 2x2 tiles
    // (kWinograd4Tiles 4x4 ones) each and at least kConvParts with the
    // channel blocks. Per part, in this thread's scratch: V [points][T][C],
    // each tile's input patch as B^T d B (tj_wino_in); then per point xi of
    // the domain a GEMM of V[xi] [T, C] by u's [C, 64] (the 1x1 form's
    // tiles, tj_conv_tile_cl) into Mb [points][T][64]; then each tile's
    // outputs A^T m A (tj_wino_out) into y, and the epilogue over the part's
    // output rows. The input transform is redone per block of 64 output
    // channels (about 6% of the GEMM's work at 64 channels, less past them).
    const int64_t cb = 64, cbn = (M + cb - 1) / cb, per_part = wm == 4 ? kWinograd4Tiles : kWinogradTiles;
    const int64_t TB = even_blocks(cbn, std::min<int64_t>(TH, std::max<int64_t>((kConvParts + cbn - 1) / cbn, (TH * TW + per_part - 1) / per_part)), TH);
    const int64_t Tmax = (TH + TB - 1) / TB * TW, Tmin = TH / TB * TW;
    const int64_t Sx = pl.padded() ? (Hp * row * 4 + 63) / 64 * 64 : 0, Sv = (points * Tmax * C_ * 4 + 63) / 64 * 64, Sm = points * Tmax * cb * 4;
    if (!pl.padded()) scratch(Dim(0));
    out_.scratch_sizes.back() = Dim(Sx + Sv + Sm);  // per thread; the first one's starts with the padded input
    code += open_sums("tb", TB) + "    " + open_parallel(S(cbn * TB));
    code += "      const int64_t pr = tj_part / " + S(TB) + ", tb = tj_part % " + S(TB) + ";\n";
    code += "      const int64_t r0 = tb*" + S(TH) + "/" + S(TB) + ", r1 = (tb + 1)*" + S(TH) + "/" + S(TB) + ", T = (r1 - r0)*" + S(TW) + ";\n";
    code += "      const int64_t m0 = pr*" + S(cb) + ", valid = std::min<int64_t>(" + S(cb) + ", " + S(M) + " - m0);\n";
    code += "      float* V = (float*)((char*)" + slot(tj_slot_scratch) + " + tj_thread*" + S(Sx + Sv + Sm) + " + " + S(Sx) + ");\n";
    code += "      float* Mb = V + " + S(Sv / 4) + ";\n";
    code += "      for (int64_t t = 0; t < T; ++t)\n        tj_wino_in<" + S(wm) + ">(xpad + ((r0 + t/" + S(TW) + ")*" + S(wm * row) + " + t%" + S(TW) + "*" +
            S(wm * C_) + "), " + S(row) + ", " + S(C_) + ", " + S(C_) + ", V + t*" + S(C_) + ", " + S(Tmax * C_) + ");\n";
    code += "      const float* u = " + ptr(n.inputs[3]) + " + pr*" + S(points * C_ * cb) + ";\n";
    code += "      for (int xi = 0; xi < " + S(points) + "; ++xi) {\n";
    code += "        const float* vx = V + xi*" + S(Tmax * C_) + ";\n        float* mx = Mb + xi*" + S(Tmax * cb) + ";\n";
    auto tiles = [&](int nv) {
      // Every part holds at least Tmin >= np tiles: one moved back to end at T stays inside.
      const int64_t np = row_tiles(Tmin, wide_tile_positions(nv)).np;
      return "        for (int64_t q = 0; q < T; q += " + S(np) + ") {\n          const int64_t at = std::min<int64_t>(q, T - " + S(np) + ");\n          " +
             tile_head(np, nv, 1, 1, false, 64, 0) + "vx + at*" + S(C_) + ", " + S(C_) + ", 0, 0, u + xi*" + S(C_ * cb) + ", 0, " + S(C_) + ", mx + at*" +
             S(cb) + ", " + S(cb) + ", valid);\n        }\n";
    };
    code += by_channel_quads(M, tiles, "        ") + "      }\n";
    code += "      float* yb = " + Y + " + b*" + S(P * M) + " + m0;\n";
    code += "      for (int64_t t = 0; t < T; ++t) {\n        const int64_t oh = " + S(wm) + "*(r0 + t/" + S(TW) + "), ow = " + S(wm) + "*(t%" + S(TW) + ");\n";
    code += "        tj_wino_out<" + S(wm) + ">(Mb + t*" + S(cb) + ", " + S(Tmax * cb) + ", valid, yb + (oh*" + S(OW) + " + ow)*" + S(M) + ", " + S(OW * M) + ", " +
            S(M) + ", (int)std::min<int64_t>(" + S(wm) + ", " + S(pl.OH) + " - oh), (int)std::min<int64_t>(" + S(wm) + ", " + S(OW) + " - ow));\n      }\n";
    if (epilogue)
      code += "      {\n" + epilogue_over("m0", "m0 + valid", S(wm) + "*r0*" + S(OW), "std::min<int64_t>(" + S(pl.OH) + ", " + S(wm) + "*r1)*" + S(OW)) + "      }\n";
    code += "    " + close_parallel() + close_sums() + "  }\n";
    return with_sums(code);
  }
  const std::string xr = S(pl.DH * row), xk = S(pl.DW * C_);
  if (flat) {
    // 1x1, stride 1, no padding: the positions are one run, x's C apart and
    // y's M: parts of at least kDirectPositions of them (or all) by 64
    // channels, equal tiles across the rows (a 7x7 image is 49 positions, 7
    // tiles of 7 by 4 vectors), the last one of a part ending at the part's
    // end.
    // At least kConvParts parts over positions and channel blocks together
    // where the positions allow parts of 2*kTilePositions (a 28x28 1x1 conv
    // to 24 channels was one part: one thread worked, the others waited).
    const int64_t cb = 64, cbn = (M + cb - 1) / cb;
    const int64_t blocks = even_blocks(cbn, std::max<int64_t>({1, P / kDirectPositions, std::min<int64_t>((kConvParts + cbn - 1) / cbn, P / (2 * kTilePositions))}),
                                       std::max<int64_t>(1, P / (2 * kTilePositions)));
    code += open_sums("blk", blocks) + "    " + open_parallel(S(cbn * blocks));
    code += "      const int64_t pr = tj_part / " + S(blocks) + ", blk = tj_part % " + S(blocks) + ";\n";
    code += "      const int64_t q0 = blk*" + S(P / blocks) + ", q1 = blk + 1 == " + S(blocks) + " ? " + S(P) + " : q0 + " + S(P / blocks) + ";\n";
    code += "      const int64_t m0 = pr*" + S(cb) + ", valid = std::min<int64_t>(" + S(cb) + ", " + S(M) + " - m0);\n";
    code += "      const float* wp = " + Wp_ + " + pr*" + S(cb) + "*" + Cx + ";\n";
    code += "      float* yb = " + (rep.bits ? rep_out : Y) + " + b*" + S(P * M) + " + m0;\n";
    const bool tiled = epilogue && !rep.bits;
    if (tiled) code += "      alignas(64) float tj_tile[" + S(kTileFloats) + "];\n";
    auto tiles = [&](int nv) {
      const int64_t np = row_tiles(P / blocks, wide_tile_positions(nv)).np;
      const std::string y = tiled ? "tj_tile, 64" : "yb + at*" + S(M) + ", " + S(M);
      return "        for (int64_t q = q0; q < q1; q += " + S(np) + ") {\n          const int64_t at = std::min<int64_t>(q, q1 - " + S(np) +
             ");\n          " + tile_head(np, nv, 1, 1, false, 64, rep.bits) + "xpad + at*" + Cx + ", " + Cx + ", 0, 0, wp, 0, " + Cx + ", " + y + ", valid" + rep_args + ");\n" +
             (tiled ? "          const int64_t tj_n0 = q, tj_n1 = std::min<int64_t>(q + " + S(np) + ", q1);\n" +  // the tile's new positions
                            epilogue_over("m0", whole_end(M, nv), "tj_n0", "tj_n1", "at")
                      : "") +
             "        }\n";
    };
    // Every part holds at least 2*kTilePositions >= np positions, so a tile moved
    // back to end at q1 stays within its part.
    code += by_channel_quads(M, tiles, "      ");
    code += "    " + close_parallel() + close_sums() + "  }\n";
    return with_sums(code);
  }
  if (dense) {
    // Parts of whole rows, about kDirectPositions positions each, and at
    // least kConvParts with the channel blocks where the rows allow. In
    // groups, block pr reads its group's Cg input channels, from
    // channel pr / (Mg / lanes) * Cg of each position.
    const int64_t cb = lanes, cbn = (M + cb - 1) / cb, row_parts = (kConvParts + cbn - 1) / cbn;
    const int64_t RB = even_row_blocks(cbn, pl.OH, std::max<int64_t>(1, std::min<int64_t>({pl.OH, (kDirectPositions + OW - 1) / OW, (pl.OH + row_parts - 1) / row_parts})));
    const int64_t RBs = (pl.OH + RB - 1) / RB;
    const std::string wt = S(Cg * cb);  // the taps' distance in a block's weights
    code += open_sums("tj_part % " + S(RBs), RBs) + "    " + open_parallel(S(cbn * RBs));
    code += "      const int64_t pr = tj_part / " + S(RBs) + ", r0 = tj_part % " + S(RBs) + " * " + S(RB) + ", r1 = std::min<int64_t>(" + S(pl.OH) + ", r0 + " +
            S(RB) + ");\n";
    code += "      const int64_t m0 = pr*" + S(cb) + ", valid = std::min<int64_t>(" + S(cb) + ", " + S(M) + " - m0);\n";
    code += "      const float* wp = " + Wp_ + " + pr*" + S(pl.KH * pl.KW * Cg * cb) + ";\n";
    const std::string group_at = G == 1 ? "" : " + pr/" + S(M / G / cb) + "*" + S(Cg);
    // A part whose weights outgrow the cache goes over its rows once per
    // block of Cb input channels, the sums kept in y between blocks (each
    // weight read from memory once per part, not once per row), the
    // epilogue after each tile of the last block, while it is in L1. That
    // needs tiles that never overlap, rows a multiple of their tiles: a
    // block's sums would be added twice where they do. Without blocks, the
    // sums go to tj_tile.
    const bool exact = tiles_exactly(M, OW, {OW});
    const int64_t Cb = exact && G == 1 ? conv_channel_block(Cg, pl.KH * pl.KW * cb) : Cg, cbs = (Cg + Cb - 1) / Cb;
    // Without blocks, a register epilogue (rep) stores the tiles' results
    // straight into its output; otherwise the sums go to tj_tile.
    const bool regt = rep.bits && cbs == 1, tiled = epilogue && cbs == 1 && !regt;
    code += "      float* yb = " + (regt ? rep_out : Y) + " + b*" + S(P * M) + " + m0;\n";
    if (tiled) code += "      alignas(64) float tj_tile[" + S(kTileFloats) + "];\n";
    if (cbs > 1) code += "      for (int64_t cbk = 0; cbk < " + S(cbs) + "; ++cbk) {\n";
    code += "      for (int64_t oh = r0; oh < r1; ++oh) {\n";
    code += "        const float* xrow = xpad + oh*" + S(pl.SH * row) + group_at + (cbs > 1 ? " + cbk*" + S(Cb) : "") + ";\n";
    if (trim_rows) code += tap_range("oh", pl.SH, pl.PH, pl.DH, pl.KH, pl.H, "kh", "        ");
    auto tiles = [&](int nv) {
      const RowTiles rt = row_tiles(OW, wide_tile_positions(nv));
      const int64_t count = rt.count, np = rt.np;
      // Likewise the columns: per tile (fixed at compile time), the kernel
      // columns some position of it reads the image through, [kw0, kw1);
      // where a quarter or more of the tiles' columns lie in the padding,
      // each tile is its own call, x and the weights starting at column kw0
      // (tj_conv_tile_cl's KWW: the weights' taps per kernel row stay KW).
      std::vector<std::pair<int64_t, int64_t>> cols;  // per tile: kw0, kw1
      int64_t dead_cols = 0;
      bool empty_col = false;
      for (int64_t i = 0; i < count; ++i) {
        const int64_t ow = std::min(i * np, OW - np);
        const windows::TapSpan span = windows::live_taps(ow, ow + np, pl.SW, pl.PW, pl.DW, pl.KW, pl.W);
        empty_col |= span.empty();
        dead_cols += pl.KW - span.size();
        cols.emplace_back(span.t0, span.t1);
      }
      const bool trim_cols = !empty_col && 4 * dead_cols >= count * pl.KW;
      // nkh kernel rows from row kh0 (`from_kh0`), or all of them, by nkw
      // columns from column kw0.
      auto rows_call = [&](bool acc, const std::string& c, const std::string& at, int64_t nkh, bool from_kh0, int64_t kw0, int64_t nkw) {
        std::string x0 = from_kh0 ? "xrow + kh0*" + xr : "xrow", w0 = from_kh0 ? "wp + kh0*" + S(pl.KW * Cg * cb) : "wp";
        if (kw0 > 0) x0 += " + " + S(kw0 * pl.DW * C_), w0 += " + " + S(kw0 * Cg * cb);
        return at + tile_head(np, nv, nkh, nkw, acc, cb, regt ? rep.bits : 0, pl.KW) + x0 + " + ow*" + S(pl.SW * C_) + ", " + S(pl.SW * C_) + ", " + xr +
               ", " + xk + ", " + w0 + (cbs > 1 ? " + cbk*" + S(Cb * cb) : "") + ", " + wt + ", " + c + ", " +
               (tiled ? "tj_tile, 64" : "yb + (oh*" + S(OW) + " + ow)*" + S(M) + ", " + S(M)) + ", valid" + (regt ? rep_args : "") + ");\n";
      };
      // The tile of columns [kw0, kw0 + nkw), or with trim_rows a switch on the rows inside.
      auto dispatch = [&](bool acc, const std::string& c, const std::string& at, int64_t kw0, int64_t nkw) {
        if (!trim_rows) return rows_call(acc, c, at, pl.KH, false, kw0, nkw);
        std::string sw = at + "switch (kh1 - kh0) {\n";
        for (int64_t nkh : row_counts) sw += rows_call(acc, c, "              case " + S(nkh) + ": ", nkh, true, kw0, nkw) + "                break;\n";
        return sw + rows_call(acc, c, "              default: ", pl.KH, false, kw0, nkw) + "            }\n";
      };
      // One tile's statements, at its ow (and i).
      auto one = [&](int64_t kw0, int64_t nkw) {
        std::string body;
        if (cbs == 1) body += dispatch(false, S(Cg), "            ", kw0, nkw);
        else
          body += "            const int64_t cn = std::min<int64_t>(" + S(Cb) + ", " + S(Cg) + " - cbk*" + S(Cb) + ");\n            if (cbk == 0) " +
                  dispatch(false, "cn", "", kw0, nkw) + "            else " + dispatch(true, "cn", "", kw0, nkw);
        const std::string at = "oh*" + S(OW) + " + ow";
        if (cbs > 1 && epilogue)
          body += "            if (cbk == " + S(cbs - 1) + ") {\n" + epilogue_over("m0", whole_end(M, nv), at, at + " + " + S(np)) + "            }\n";
        if (tiled)  // the tile's new positions, [i*np, min((i + 1)*np, OW)) of the row
          body += "            const int64_t tj_t0 = " + at + ";\n" +
                  epilogue_over("m0", whole_end(M, nv), "oh*" + S(OW) + " + i*" + S(np), "oh*" + S(OW) + " + std::min<int64_t>((i + 1)*" + S(np) + ", " + S(OW) + ")",
                                "tj_t0");
        return body;
      };
      if (!trim_cols)
        return "          for (int64_t i = 0; i < " + S(count) + "; ++i) {\n            const int64_t ow = std::min<int64_t>(i*" + S(np) + ", " + S(OW - np) +
               ");\n" + one(0, pl.KW) + "          }\n";
      std::string body;
      for (int64_t i = 0; i < count; ++i)
        body += "          {\n            const int64_t i = " + S(i) + ", ow = " + S(std::min(i * np, OW - np)) + ";\n            (void)i;\n" +
                one(cols[static_cast<size_t>(i)].first, cols[static_cast<size_t>(i)].second - cols[static_cast<size_t>(i)].first) + "          }\n";
      return body;
    };
    code += (G == 1 ? by_channel_quads(M, tiles, "        ") : tiles(static_cast<int>(cb / 16))) + "      }\n";
    if (cbs > 1) code += "      }\n";
    code += "    " + close_parallel() + close_sums() + "  }\n";
    return with_sums(code);
  }
  // Depthwise, or grouped (Cg inputs and outputs per group: tj_gc_cl, the
  // same loops): parts of whole output rows, about kDepthwiseOutputs outputs each.
  const std::string one = Cg == 1 ? "tj_dw_cl<" + S(pl.KH) + ", " + S(pl.KW) + ", " : "tj_gc_cl<" + S(pl.KH) + ", " + S(pl.KW) + ", " + S(Cg) + ", " + S(C_) + ", ";
  const int64_t RB = std::max<int64_t>(1, std::min<int64_t>(pl.OH, kDepthwiseOutputs / std::max<int64_t>(1, OW * C_))), RBs = (pl.OH + RB - 1) / RB;
  code += open_sums("tj_part", RBs) + "    " + open_parallel(S(RBs));
  code += "      const int64_t r0 = tj_part*" + S(RB) + ", r1 = std::min<int64_t>(" + S(pl.OH) + ", r0 + " + S(RB) + ");\n";
  // The output columns whose windows are inside the image, [lo, hi):
  // in runs of up to kDwRun (tj_cl_run; equal
  // runs, the last one moved back to end at hi); the border columns as runs
  // of their own where they are a run's width, else one at a time.
  // (hi: the last column whose window ends inside, plus one; none when
  // even column 0's window ends past the image: C++ division truncates)
  const int64_t last_in = pl.W - 1 + pl.PW - (pl.KW - 1) * pl.DW;
  const int64_t lo = std::min(OW, (pl.PW + pl.SW - 1) / pl.SW), hi = std::max(lo, last_in < 0 ? int64_t(0) : std::min(OW, last_in / pl.SW + 1));
  const bool runs = hi > lo;
  const RowTiles rt = row_tiles(std::max<int64_t>(1, hi - lo), kDwRun);
  // With an epilogue, each group of columns (the left border, a run, the
  // right border) stores its sums into tj_tile, on the part's stack, and the
  // epilogue runs over them right after, from L1: the sums never reach y
  // unless the conv's value is itself a kernel output (efficientnet's and
  // mobilenet's depthwise convs with bias and clip wrote 1.8 MB of sums at
  // 56x56x144 and read them back a row later).
  // Where every column goes in runs (the borders too) and the epilogue is
  // a bias and at most a ReLU or a clip by constants, the runs apply it in
  // registers and store to the kernel's output: no tile, no second pass.
  const bool all_runs = runs && lo <= kDwRun && OW - hi <= kDwRun;
  const RegisterEpilogue drep = all_runs ? rep : RegisterEpilogue{};
  const int64_t TN = runs ? std::max({lo, OW - hi, rt.np}) : OW;
  const bool tiled = epilogue && !drep.bits && TN * M * 4 <= kDepthwiseTileBytes;
  if (tiled) code += "      alignas(64) float tj_tile[" + S(TN * M) + "];\n";
  // Per output position the window's first tap (khi, kwi), which may lie in
  // the padding; the taps inside the image are [kh0, kh1) x [kw0, kw1). Its
  // sums go to `to`.
  auto yat = [&](const std::string& ow, const std::string& g0) {
    return tiled ? "tj_tile + (" + ow + " - " + g0 + ")*" + S(M)
                 : (drep.bits ? ptr(drep.out) : Y) + " + ((b*" + S(pl.OH) + " + oh)*" + S(OW) + " + " + ow + ")*" + S(M);
  };
  // The epilogue over columns [c0, c1) of the row, from the tile, whose
  // first column is t0. A run moved back over columns done already covers
  // only its new ones: an epilogue that read its own output (a donated
  // residual) must run once per position.
  auto epilogue_cols = [&](const std::string& t0, const std::string& c0, const std::string& c1) {
    if (!tiled) return std::string();
    return "      {\n        const int64_t tj_t0 = oh*" + S(OW) + " + " + t0 + ";\n" +
           epilogue_over("0", S(M), "oh*" + S(OW) + " + " + c0, "oh*" + S(OW) + " + " + c1, "tj_t0", M) + "      }\n";
  };
  auto one_at_a_time = [&](int64_t from, int64_t to) {
    if (from >= to) return std::string();
    const std::string at = "xpad + (khi*" + S(pl.W) + " + kwi)*" + S(C_) + ", " + xr + ", " + xk + ", " + Wp_ + ", " + S(C_) + ", " + yat("ow", S(from));
    return "      for (int64_t ow = " + S(from) + "; ow < " + S(to) + "; ++ow) {\n" + tap_range("ow", pl.SW, pl.PW, pl.DW, pl.KW, pl.W, "kw", "        ") +
           "        if (kh0 == 0 && kh1 == " + S(pl.KH) + " && kw0 == 0 && kw1 == " + S(pl.KW) + ") " + one + "true>(" + at + ", 0, 0, 0, 0);\n" +
           "        else " + one + "false>(" + at + ", kh0, kh1, kw0, kw1);\n      }\n" + epilogue_cols(S(from), S(from), S(to));
  };
  code += "      for (int64_t oh = r0; oh < r1; ++oh) {\n" + tap_range("oh", pl.SH, pl.PH, pl.DH, pl.KH, pl.H, "kh", "        ");
  // A run of np positions from column ow (its first input column `col`
  // inside the image, L and R of its columns outside).
  auto run_call = [&](int64_t np, int64_t L, int64_t R, const std::string& col) {
    std::string head = "tj_cl_run<" + S(pl.KW) + ", " + S(Cg) + ", " + S(pl.SW) + ", " + S(pl.DW) + ", " + S(np);
    if (L || R || drep.bits) head += ", " + S(L) + ", " + S(R) + (drep.bits ? ", " + std::to_string(drep.bits) : "");
    const std::string ep = drep.bits ? ", " + (B.empty() ? std::string("nullptr") : B) + ", " + codegen::literal(drep.lo, DType::f32) + ", " +
                                           codegen::literal(drep.hi, DType::f32)
                                     : "";
    return "        " + head + ">(xpad + ((khi + kh0*" + S(pl.DH) + ")*" + S(pl.W) + " + " + col + ")*" + S(C_) + ", " + xr + ", " + S(C_) + ", " + Wp_ +
           " + kh0*" + S(pl.KW * Cg * C_) + ", " + S(C_) + ", " + yat("ow", "ow") + ", " + S(M) + ", kh1 - kh0" + ep + ");\n";
  };
  // The border columns [from, to) as one run (at most kDwRun, the taps
  // outside left out) where they are a run's width: its first column
  // from*SW - PW, L of them left of the image, R right of it.
  auto border_run = [&](int64_t from, int64_t to) {
    if (from >= to || to - from > kDwRun) return one_at_a_time(from, to);
    const int64_t np = to - from, first = from * pl.SW - pl.PW, J = (np - 1) * pl.SW + (pl.KW - 1) * pl.DW + 1;
    const int64_t L = std::max<int64_t>(0, -first), R = std::max<int64_t>(0, first + J - pl.W);
    return "      {\n        const int64_t ow = " + S(from) + ";\n" + run_call(np, L, R, S(first + L)) + "      }\n" + epilogue_cols(S(from), S(from), S(to));
  };
  if (runs) {
    code += border_run(0, lo);
    code += "      for (int64_t i = 0; i < " + S(rt.count) + "; ++i) {\n        const int64_t ow = " + S(lo) + " + std::min<int64_t>(i*" + S(rt.np) + ", " +
            S(hi - lo - rt.np) + ");\n";
    code += run_call(rt.np, 0, 0, "ow*" + S(pl.SW) + " - " + S(pl.PW));
    code += epilogue_cols("ow", S(lo) + " + i*" + S(rt.np), "ow + " + S(rt.np)) + "      }\n";
    code += border_run(hi, OW);
  } else {
    code += one_at_a_time(0, OW);
  }
  code += "      }\n";
  if (epilogue && !tiled && !drep.bits) code += "      {\n" + epilogue_over("0", S(M), "r0*" + S(OW), "r1*" + S(OW)) + "      }\n";
  code += "    " + close_parallel() + close_sums() + "  }\n";
  return with_sums(code);
}

}  // namespace tj::cpp
