// Channels-last layouts: conv's channels_last form reads [N, d.., C] and
// writes [N, o.., M] (ir/ops/conv.cpp); assign_layouts (passes) chooses it.
// The permutations between a rank-r value's channels-first form
// [N, C, d..] and its channels-last form [N, d.., C].
#pragma once

#include <cstdint>
#include <vector>

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

}  // namespace tj
