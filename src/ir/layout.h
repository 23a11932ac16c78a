// Layouts of values and weights. Channels last: conv's channels_last form
// reads [N, d.., C] and writes [N, o.., M] (ir/ops/conv.cpp); assign_layouts
// (passes) chooses it. The permutations between a rank-r value's
// channels-first form [N, C, d..] and its channels-last form [N, d.., C].
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace tj {

// channels-last -> channels-first: permute(x_last, channels_first_perm(r)) is x_first.
inline std::vector<int64_t> channels_first_perm(int64_t r) {
  std::vector<int64_t> p{0, r - 1};
  for (int64_t i = 1; i + 1 < r; ++i) p.push_back(i);
  return p;
}

// channels-first -> channels-last.
inline std::vector<int64_t> channels_last_perm(int64_t r) {
  std::vector<int64_t> p{0};
  for (int64_t i = 2; i < r; ++i) p.push_back(i);
  p.push_back(1);
  return p;
}

// The constant behind pack_conv_weights' views of conv weights w, or -1:
// Wp [ceil(M/16), C, k.., 16] (one group), Wq [ceil(M/lanes), k.., C, lanes]
// (channels last, one group or groups of 16 outputs and more:
// conv_quad_lanes), or Wt [taps, C] (channels-last depthwise) or
// [taps, C/groups, M] (channels-last grouped, groups of as many outputs as
// inputs: grouped_channels_last). A param
// the program cache made of the constant counts too. The C++ conv kernels
// read these constants directly.
ValueId packed_conv_blocks(const Graph& g, ValueId w);
// The order Wp and Wq keep w's dims 1..r-1 in (w of rank r): C, k.. for
// Wp; k.., C for Wq. And the permute that takes a constant [ceil(M/lanes),
// w's dims in `order`, lanes] to [ceil(M/lanes), lanes, C, k..], which a
// reshape then makes w's shape: the pass writes it, the kernels' views
// above recognize it.
std::vector<int64_t> blocks_order(int64_t r);
std::vector<int64_t> quads_order(int64_t r);
std::vector<int64_t> packed_view_perm(const std::vector<int64_t>& order);
ValueId packed_conv_quads(const Graph& g, ValueId w, int64_t lanes = 64);
ValueId packed_conv_taps(const Graph& g, ValueId w);
// Whether a conv of these weights [M, C/groups, k..] in `groups` groups is
// one the channels-last grouped kernel computes: as many outputs per group
// as inputs, 2 or more, and not a multiple of 16 (those take the direct
// tiles, conv_quad_lanes; one is depthwise).
bool grouped_channels_last(const Shape& w, int64_t groups);
// Whether such a conv's groups divide no vector of `vector_floats` floats
// (regnet_y_1_6gf's 24 channels): the generated form computes them one
// channel at a time. On the CPU they take the matrix library by rule (the
// C++ emitter), and fusion gives their kernel only the library's epilogue.
bool grouped_by_library(const Shape& w, int64_t groups, int64_t vector_floats);
// The output channels per block of Wq for a conv of these weights in
// `groups` groups that the channels-last direct form computes, or 0: 64 for
// one group; for groups whose outputs are a multiple of 16 (resnext's 16
// and 32 inputs and outputs per group), min(outputs per group, 64) when that
// divides them, so that no block spans two groups (Wq [M/lanes, k.., C/groups,
// lanes]: each block's tiles read their group's input channels only).
int64_t conv_quad_lanes(const Shape& w, int64_t groups);
// Whether a channels-last conv of these weights takes its weights taps
// first (Wt) and the depthwise or grouped kernel: one input channel per
// group and as many groups as outputs, or grouped_channels_last.
bool taps_first_conv(const Shape& w, int64_t groups);

}  // namespace tj
