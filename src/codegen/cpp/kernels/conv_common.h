// What the conv kernel files share: conv.cpp (channels first) and
// conv_channels_last.cpp. Sizes, the 2-D plane geometry with its padded
// copy, and how a row of output positions and a conv's output channels are
// cut into register tiles.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codegen/cpp/build.h"

namespace tj::cpp::conv_kernels {

inline constexpr int64_t kConvColumns = 256;  // output positions per part of the window form (at least a row)
inline constexpr int64_t kConvParts = 8;      // parts a convolution is split into at least, where channels allow
inline constexpr int64_t kConvChannelBlock = 32;
inline constexpr int64_t kDirectPositions = 512;  // output positions per part of the direct form (whole rows)
inline constexpr int64_t kTilePositions = 12;     // a tile's positions with 2 vectors of channels (24 accumulators)
inline constexpr int64_t kFlatPositions = 64;       // a 1x1 convolution with this many positions takes vectors over them
inline constexpr int64_t kDepthwiseOutputs = 4096;  // outputs per part of a depthwise convolution, at least
inline constexpr int64_t kRowFormTaps = 64;  // input channels x taps below which the direct form takes vectors over positions
inline constexpr int64_t kRowSlack = 128;    // floats past the padded planes the row form may read
inline constexpr int64_t kWeightBlockBytes = 256 << 10;  // a direct conv's part reads at most this much weight per pass over its rows
inline constexpr int64_t kWinogradTiles = 28;  // 2x2 output tiles per part of the Winograd form, about (20-28 best, 64 6% slower at 56x56)
inline constexpr int64_t kWinograd4Tiles = 8;  // 4x4 output tiles per part of the Winograd F(4x4) form, about (resnet18: 8 2% faster than 12; 4, 6, 24 within 1.6%)
inline constexpr int64_t kDwRun = 8;         // positions a channels-last depthwise conv computes together inside the image, at most
inline constexpr int64_t kDepthwiseTileBytes = 64 << 10;  // a depthwise conv's sums between its taps and its epilogue, on the stack, at most

inline std::string S(int64_t v) { return std::to_string(v); }

// Blocks of a convolution's positions, `blocks` or one more where that
// leaves an odd count of parts with the `cbn` channel blocks and `most`
// allows it: parts are claimed by the pool's threads in equal ranges, and
// an odd count over two leaves one thread a part longer (9 parts of
// mobilenet_v2's 28x28 1x1 convolution to 192 channels: 5 against 4).
inline int64_t even_blocks(int64_t cbn, int64_t blocks, int64_t most) {
  return (cbn * blocks) % 2 == 0 || blocks + 1 > most ? blocks : blocks + 1;
}

// The same for parts of RB whole rows of OH (ceil(OH/RB) of them): where the
// count with the channel blocks is odd, fewer rows a part until it is even,
// at most twice the parts (112 rows by 5 are 23 parts; by 4, 28).
inline int64_t even_row_blocks(int64_t cbn, int64_t OH, int64_t RB) {
  for (int64_t rows = (OH + RB - 1) / RB; rows <= std::min<int64_t>(OH, 2 * ((OH + RB - 1) / RB)); ++rows)
    if (const int64_t rb = (OH + rows - 1) / rows; (cbn * ((OH + rb - 1) / rb)) % 2 == 0) return rb;
  return RB;
}

// One or two spatial dims as a plane [H, W] (H = 1 for one), and the plane
// padded to [Hp, Wp]: the begin pads, the image, then zeros to what the
// kernel's last window reads.
struct Plane {
  int64_t H, W, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW, Hp, Wp;
  Plane(const std::vector<int64_t>& in, const std::vector<int64_t>& ker, const std::vector<int64_t>& out, const std::vector<int64_t>& stride,
        const std::vector<int64_t>& pad, const std::vector<int64_t>& dil) {
    const bool two = in.size() == 2;
    H = two ? in[0] : 1, W = in.back(), OH = two ? out[0] : 1, OW = out.back(), KH = two ? ker[0] : 1, KW = ker.back();
    SH = two ? stride[0] : 1, SW = stride.back(), PH = two ? pad[0] : 0, PW = pad.back(), DH = two ? dil[0] : 1, DW = dil.back();
    Hp = std::max(H + PH, (OH - 1) * SH + (KH - 1) * DH + 1), Wp = std::max(W + PW, (OW - 1) * SW + (KW - 1) * DW + 1);
  }
  bool padded() const { return PH > 0 || PW > 0 || Hp > H || Wp > W; }
  // Statements (at indent `at`) filling `dst`, a padded plane, from the image
  // at `src`: the plane zeroed, then the image's rows copied in. (A single
  // loop over the padded rows, zeroing border rows with `continue`, was
  // miscompiled by GCC 12 at -O3: rows of the copy came out zero.)
  // With zero false the border is already zero (a plane reused for the
  // next channel: only the image's rows change).
  std::string copy(const std::string& dst, const std::string& src, const std::string& at, bool zero = true) const {
    return (zero ? at + "for (int64_t i = 0; i < " + S(Hp * Wp) + "; ++i) " + dst + "[i] = 0;\n" : std::string()) + at + "for (int64_t i = 0; i < " + S(H) +
           "; ++i)\n" + at +
           "  for (int64_t j = 0; j < " + S(W) + "; ++j) " + dst + "[(i + " + S(PH) + ")*" + S(Wp) + " + " + S(PW) + " + j] = " + src + "[i*" + S(W) +
           " + j];\n";
  }
};


// Statements (at indent `at`) for output position `o` along one spatial
// dim (stride s, begin pad p, dilation d, k taps, an input of n): its
// window's first tap `<v>i`, which may lie in the padding, and the taps
// inside the input, [<v>0, <v>1) (empty for a window all padding).
inline std::string tap_range(const std::string& o, int64_t s, int64_t p, int64_t d, int64_t k, int64_t n, const std::string& v, const std::string& at) {
  return at + "const int64_t " + v + "i = " + o + "*" + S(s) + " - " + S(p) + ";\n" + at + "const int " + v + "0 = " + v + "i >= 0 ? 0 : (int)((-" + v +
         "i + " + S(d - 1) + ")/" + S(d) + "), " + v + "1 = (int)std::min<int64_t>(" + S(k) + ", " + v + "i >= " + S(n) + " ? 0 : (" + S(n - 1) + " - " + v +
         "i)/" + S(d) + " + 1);\n";
}

// A row of OW output positions in equal tiles of at most `cap` positions:
// `count` tiles of `np`, the last one moved back to end at the row's end (it
// recomputes a few positions, alike). One tile width per row.
struct RowTiles {
  int64_t count, np;
};
inline RowTiles row_tiles(int64_t OW, int64_t cap) {
  const int64_t count = (OW + cap - 1) / cap;
  return {count, (OW + count - 1) / count};
}

// Channels last, the output channels in blocks of 64 (`valid` channels
// each at run time, all but the last block whole): a tile is nv vectors of
// 16 channels by up to wide_tile_positions(nv) positions, about 24-28
// accumulators. `tiles(nv)` is the code for one width; the whole blocks take
// 4 vectors, a last partial one the vectors it needs, each width behind a
// branch on `valid` (at indent `at`), one alone none.
// Without AVX-512 (the generated code's flags: -march=native and
// $TJ_CXXFLAGS, as the compiler probe found them), a tile runs as
// sub-tiles of 6 positions by 8 channels (tj_conv_tile_cl): tiles of 3 and 4
// vectors take 6 positions, one sub-tile of 12 accumulators (7 ran as 4 and
// 3 positions, each loading more than it multiplied: mnasnet's 7x7 1x1
// convs at a quarter of the machine's rate). With no compiler, the CPU's.
inline bool wide_vectors() { return generated_vector_floats() >= 16; }
inline int64_t wide_tile_positions(int nv) {
  static constexpr int64_t wide[5] = {0, 24, 12, 8, 7}, narrow[5] = {0, 24, 12, 6, 6};
  return (wide_vectors() ? wide : narrow)[nv];
}
inline constexpr int64_t kTileFloats = 24 * 64;  // a tile's sums at 64 floats a position, the widest tile

// The tile widths (vectors) by_channel_quads uses for M channels.
inline std::vector<int> quad_widths(int64_t M) {
  const int64_t last = M - 64 * ((M - 1) / 64);
  const int tail = static_cast<int>((last + 15) / 16);
  if (M <= 64 || tail == 4) return {M <= 64 ? tail : 4};
  return {4, tail};
}
// Whether runs of these lengths, in the tiles of every width M uses (as
// row_tiles cuts a run of `basis`), need no tile moved back over its
// neighbour: each length a multiple of the tile.
inline bool tiles_exactly(int64_t M, int64_t basis, const std::vector<int64_t>& lengths) {
  for (int nv : quad_widths(M))
    for (int64_t L : lengths)
      if (L % row_tiles(basis, wide_tile_positions(nv)).np != 0) return false;
  return true;
}
// The end of a tile's channels in code (from m0): "m0 + 64" where tiles of
// nv vectors only cover whole blocks (the last block takes other widths,
// or M is a multiple of 64), else "m0 + valid". A constant count lets the
// epilogue read whole vectors: masked loads of sums the tile has just
// stored are not forwarded from the stores (efficientnet_b0's 14x14
// 112->672 convs with SiLU: 170 -> 222 us with masks).
inline std::string whole_end(int64_t M, int nv) { return nv == 4 && (M % 64 == 0 || M % 64 <= 48) ? "m0 + 64" : "m0 + valid"; }
inline std::string by_channel_quads(int64_t M, const std::function<std::string(int)>& tiles, const std::string& at) {
  const std::vector<int> w = quad_widths(M);
  if (w.size() == 1) return tiles(w[0]);
  return at + "if (valid > 48) {\n" + tiles(4) + at + "} else {\n" + tiles(w[1]) + at + "}\n";
}

// Input channels per block of a direct conv whose part's weights (C input
// channels, `per` floats each) exceed kWeightBlockBytes; C when they fit.
inline int64_t conv_channel_block(int64_t C, int64_t per) {
  if (C * per * 4 <= kWeightBlockBytes) return C;
  const int64_t blocks = (C * per * 4 + kWeightBlockBytes - 1) / kWeightBlockBytes;
  return (C + blocks - 1) / blocks;
}

// The tiles of M output channels in blocks of 32 (`valid` channels each at
// run time): two vectors for every whole block and a last one of more than
// 16, one vector for a last block of 16 or fewer. `tiles(nv)` is the code for
// one width; both widths get a branch on `valid` (at indent `at`), one
// alone none.
inline std::string by_channel_vectors(int64_t M, const std::function<std::string(int)>& tiles, const std::string& at) {
  const int64_t pairs = (M + 31) / 32, last = M - 32 * (pairs - 1);
  const bool two = pairs > 1 || last > 16, one = last <= 16;
  if (two && one) return at + "if (valid > 16) {\n" + tiles(2) + at + "} else {\n" + tiles(1) + at + "}\n";
  return tiles(two ? 2 : 1);
}

}  // namespace tj::cpp::conv_kernels
