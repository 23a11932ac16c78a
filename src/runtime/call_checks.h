// What every call of a compiled program checks, whoever runs its kernels
// (the Executable's generated C++, a DeviceProgram): the same errors, worded
// the same, on the CPU and on a device.
#pragma once

#include <string>
#include <vector>

#include "reference/interpreter.h"

namespace tj {

// Every name in `inputs` is an input of g (checked only when the counts
// differ: with as many names as inputs, a missing one is reported instead).
void check_input_names(const Graph& g, const Bindings& inputs);
// The sizes of g's symbols, from the inputs' dims that are one symbol
// alone; an Error for a symbol no input gives. Every dim is checked by
// checked_input.
SymEnv sizes_from_inputs(const Graph& g, const Bindings& inputs);
// Input `v` of g, present, of its dtype, of `shape` (its shape at the bound
// sizes) and holding data.
NDArray& checked_input(const Graph& g, ValueId v, Bindings& inputs, const std::vector<int64_t>& shape);
// The error of a nonzero tj_status (codegen/abi.h: tj_status_code).
std::string status_message(int status);

}  // namespace tj
