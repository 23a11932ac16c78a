// The epilogues a channels-last conv kernel applies itself, beside its sums:
// in registers (tj_conv_tile_cl's and tj_cl_run's EP) or by the matrix
// library's post-ops (kernels/conv_library.cpp). conv_channels_last.cpp
// asks which one a kernel's ops allow.
#pragma once

#include "ir/graph.h"
#include "schedule/fusion.h"

namespace tj::cpp::conv_kernels {

// A register epilogue (tj_conv_tile_cl's EP): the conv's bias and at most
// one activation of its value, ReLU or a clip by constants in tj_clip's
// fast form, where the conv's value is not itself written: the tile adds
// and clamps its sums in registers and stores them once, into `out`.
struct RegisterEpilogue {
  int bits = 0;  // 1 bias, 2 ReLU, 4 clip; 0: none
  float lo = 0, hi = 0;  // the clip's bounds; lo +0 for ReLU
  ValueId out = -1;
  ValueId residual = -1;  // the library's epilogue alone: added before the activation
};

// The register epilogue of kernel K whose conv value is cv (with a bias or
// not): the bias alone where K is the conv, or the bias and one activation
// of cv that is K's other op; none (bits 0) otherwise.
RegisterEpilogue register_epilogue(const Graph& g, const Kernel& K, ValueId cv, bool bias);
// The matrix library's epilogue: the register one, or the bias, a residual
// (an add of the conv's value and a value of its shape: a ResNet block's
// shortcut) and at most an activation (bits 0: none), with only the last
// value written.
RegisterEpilogue library_epilogue(const Graph& g, const Kernel& K, ValueId cv, bool bias, const RegisterEpilogue& rep);

}  // namespace tj::cpp::conv_kernels
