// oneDNN's convolution for generated code: a form of the C++ emitter's
// channels-last conv, by rule or as a tuning candidate (docs/codegen.md,
// The matrix library), called through
// tj_runtime_api's conv_plan and conv_part (codegen/abi.h).
//
// A plan holds one oneDNN primitive per part (an image's block of output
// rows, each with its own padding at the image's top or bottom), made with
// one OpenMP thread and run on the pool thread that claims the part, and
// the weights reordered once from the generated kernels' packing (ir/
// layout.h) into the format the primitive chose. Plans live in the loaded
// program's state (LibraryState, the tj_slot_library slot), keyed by the
// weights' address and the geometry: a program's weights stay where they
// are for its lifetime, and the state goes with the program, so no plan
// outlives the weights it was made from.
#pragma once

#include <memory>

#include "codegen/abi.h"

namespace tj {

class LibraryState {
 public:
  LibraryState();
  ~LibraryState();
  LibraryState(const LibraryState&) = delete;
  LibraryState& operator=(const LibraryState&) = delete;
  struct Impl;
  Impl* impl() { return impl_.get(); }

 private:
  std::unique_ptr<Impl> impl_;
};

// tj_runtime_api::conv_plan and conv_part. A plan the library cannot make,
// or makes only with its reference kernels, is null (kept, not tried again):
// the generated code then runs its own form.
void* library_conv_plan(void* state, const tj_conv_desc* d, const float* w);
int library_conv_part(void* plan, const float* x, const float* b, const float* r, float* y, int64_t part);

}  // namespace tj
