// The IR-facing side of memory planning: which values a schedule writes to
// memory, when each is live, which may share storage in place, and the kernel
// order that lowers the peak. The arithmetic lives in planner.h/reorder.h.
//
// Planned: every kernel output. Graph outputs stay live to the end of the
// schedule. Not planned: inputs, params and constants (they live outside the
// arena), kv_write results and donated outputs, which are written into their
// input's array in place.
// In place: with `in_place`, a pointwise kernel's output may take over the
// storage of an input of the same size whose last reader is that kernel (and
// which is not a graph output), when the kernel reads that input only at the
// index it writes (one loop nest, no stores, no permuted or sliced reads).
#pragma once

#include <string>
#include <vector>

#include "memory/planner.h"
#include "schedule/fusion.h"

namespace tj {

struct PlannedBuffer {
  ValueId value;
  int64_t size;
  int first, last;  // kernel positions
  int slot;         // index into ActivationPlan::slots (shared when in place)
};

struct ActivationPlan {
  std::vector<PlannedBuffer> buffers;
  std::vector<BufferReq> slots;  // storage requests after in-place merging
  MemoryPlan plan;               // offsets per slot
  int in_place = 0;              // buffers that reused an input's storage
};

ActivationPlan plan_activations(const Graph& g, const Schedule& s, bool in_place = true);

// The same kernels in an order that lowers the live bytes (reorder.h).
Schedule reorder_schedule(const Graph& g, const Schedule& s);

}  // namespace tj
