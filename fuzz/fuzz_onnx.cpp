// fuzz_onnx: bytes in as an ONNX model, imported and run.
//
// bytes -> onnx_import::import_bytes -> verify -> the interpreter on seeded
// random inputs (size symbols bound to small sizes; graphs with large
// values are not run). A tj::Error anywhere is an accepted outcome (bad or
// unsupported input, clear message); any other exception, a crash or a
// sanitizer report is a finding (abort).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "frontend/onnx/import.h"
#include "ir/verifier.h"
#include "reference/interpreter.h"
#include "reference/random_inputs.h"
#include "tensorjit/error.h"

namespace {

constexpr size_t kMaxInputBytes = 1 << 18;
constexpr int64_t kMaxElements = 1 << 16;  // per value, for the run

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz_onnx: %s\n", what.c_str());
  std::abort();
}

bool small(const tj::Graph& g, const tj::SymEnv& sizes) {
  for (const tj::Node& n : g.nodes()) {
    int64_t e = 1;
    for (const tj::Dim& d : n.type.shape) {
      int64_t k = d.eval(sizes);  // throws a tj::Error if a symbol is unbound
      if (k < 0 || k > kMaxElements) return false;
      e *= k;
      if (e > kMaxElements) return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInputBytes) return 0;
  try {
    auto m = tj::onnx_import::import_bytes(std::as_bytes(std::span(data, size)), "fuzz.onnx");
    tj::verify(m.graph);
    tj::RandomInputOptions ro;
    for (const std::string& s : tj::size_symbols(m.graph)) ro.sizes[s] = 3;
    if (!small(m.graph, ro.sizes)) return 0;
    tj::Bindings in = tj::random_inputs(m.graph, ro);
    for (auto& [name, w] : m.params) in[name] = w;
    tj::interpret(m.graph, in);
  } catch (const tj::Error&) {
    // a clear error: accepted
  } catch (const std::exception& e) {
    finding(std::string("not a tj::Error: ") + e.what());
  }
  return 0;
}
