// compile(): a traced graph and its weights to an Executable, through every
// stage of the driver's list (compiler/driver.h: run_stages).
//
//   tj::Executable exe = tj::compile(graph, weights);
//   exe.run(inputs, outputs);
//
// Without a C++ compiler, compile() warns once and runs the optimized graph
// on the interpreter instead.
#pragma once

#include <optional>
#include <string>

#include "compiler/options.h"
#include "runtime/executable.h"

namespace tj {

// `params`: every param of `graph` (they are frozen into the compilation).
Executable compile(const Graph& graph, const Bindings& params, const CompileOptions& o = {});
// The program the program cache holds under `program_key` (a compilation's
// stats().program_key), without the traced graph or its weights: nothing
// when there is no compiler, no such entry, or the program still reads a
// weight that is not one of its prepared constants.
std::optional<Executable> compile_prepared(const std::string& program_key, const CompileOptions& o = {});

}  // namespace tj
