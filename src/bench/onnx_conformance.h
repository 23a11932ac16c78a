// tjc onnx-conformance: the ONNX backend node test cases (written out by
// scripts/onnx-testdata), each imported, interpreted and compiled in a child
// process of its own, and compared with the suite's expected outputs at its
// tolerances. Prints the per-op table; writes JSON and Markdown on request;
// throws when a case of `require` does not pass or any case crashed or timed
// out. Call it before this process has started threads: it forks.
#pragma once

#include <string>

namespace tj::bench {

struct ConformanceOptions {
  std::string dir = "build/onnx-node", filter, json_out, markdown, require;
  int jobs = 2;
  double timeout = 120;
  bool interpret_only = false, verbose = false;
};

void run_onnx_conformance(const ConformanceOptions& a);

}  // namespace tj::bench
