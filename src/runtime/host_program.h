// A graph with structured control flow, compiled: the ops between control-flow
// ops form graphs compiled as usual (Executables); each while_loop and cond
// is run here, on the host, by calling its regions' own compiled programs
// (which may hold control flow again) until its condition says stop. No
// user code runs in between; each region is compiled once.
#pragma once

#include <memory>
#include <vector>

#include "runtime/executable.h"

namespace tj {

bool has_control_flow(const Graph& g);

class HostProgram {
 public:
  // `g` optimized already (weights frozen), and outliving the program;
  // `compile_part` compiles its runs of plain ops and its regions (each
  // distinct region once).
  HostProgram(const Graph& g, const CompilePart& compile_part);
  std::vector<NDArray> run(Bindings& inputs);
  int64_t graphs() const;  // compiled graphs, regions included

  struct Step;

 private:
  const Graph& g_;
  std::vector<std::shared_ptr<Step>> steps_;
};

}  // namespace tj
