// tjc dynamic-demo: the JIT layer on changing shapes and data-dependent loops.
//
//   decode   512 decode steps of the tiny layer, KV length 101 -> 612, under
//            each shape policy: compilations, compile time, padded work, time
//            per step;
//   loop     y <- tanh(y @ W) until max|dy| < 1e-6, with graph breaks;
//   guards   the cost of checking a 4-tensor call against the cache.
//
// tjc explain: the demo's jitted functions, run briefly, and what each
// compiled, under which guards, and why it recompiled or broke the graph.
#pragma once

#include <cstdint>

namespace tj::bench {

struct DynamicDemoOptions {
  bool json = false;
  int64_t steps = 512, first = 101;
};

void run_dynamic_demo(const DynamicDemoOptions& a);
void explain_dynamic_demo(const DynamicDemoOptions& a);

}  // namespace tj::bench
