// fuzz_ir: IR text in, every front-end stage on it.
//
// bytes -> parse_graph -> verify -> print -> parse -> print, which must give
// the same text (the round trip the printer promises); then, when the graph is
// small and concrete enough to run quickly, interpret it on seeded random
// inputs in f32 and f64 compute. A tj::Error anywhere is an accepted outcome
// (bad input, clear message); any other exception, a crash, a sanitizer
// report, a hang or a round-trip mismatch is a finding (abort).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <set>
#include <string>
#include <string_view>

#include "ir/text.h"
#include "ir/verifier.h"
#include "reference/interpreter.h"
#include "reference/random_inputs.h"
#include "tensorjit/error.h"

namespace {

constexpr size_t kMaxInputBytes = 64 * 1024;
constexpr int64_t kMaxNodes = 200;          // over the graph and all its regions
constexpr int64_t kMaxValueElements = 4096;
constexpr int64_t kSymbolValue = 3;         // every size symbol, when interpreting

// TJ_FUZZ_VERBOSE=1: say which error each input met (for checking seeds).
bool verbose() {
  static const bool v = [] {
    const char* e = std::getenv("TJ_FUZZ_VERBOSE");
    return e && *e == '1';
  }();
  return v;
}

[[noreturn]] void finding(const std::string& what, std::string_view detail) {
  std::fprintf(stderr, "fuzz_ir: %s\n%.*s\n", what.c_str(), static_cast<int>(detail.size()), detail.data());
  std::abort();
}

// What a run of the interpreter needs to stay fast and finite: no while_loop
// (its trip count is data-dependent), few nodes, small values.
struct Size {
  int64_t nodes = 0;
  bool runnable = true;
};

void measure(const tj::Graph& g, const tj::SymEnv& env, std::set<const tj::Graph*>& seen, Size& s) {
  if (!seen.insert(&g).second) return;
  for (const tj::Node& n : g.nodes()) {
    if (++s.nodes > kMaxNodes || n.op == tj::Op::while_loop) s.runnable = false;
    int64_t count = 1;
    for (const tj::Dim& d : n.type.shape) {
      // Dims are checked one by one so that the product cannot overflow.
      for (const std::string& sym : d.symbols())
        if (!env.count(sym)) s.runnable = false;
      if (!s.runnable) return;
      int64_t v = d.eval(env);
      if (v < 0 || v > kMaxValueElements) s.runnable = false;
      else count *= v;
      if (!s.runnable || count > kMaxValueElements) {
        s.runnable = false;
        return;
      }
    }
    for (const tj::AttrValue& a : n.attrs)
      if (const auto* r = std::get_if<tj::Region>(&a)) measure(**r, env, seen, s);
  }
}

void run_interpreter(const tj::Graph& g) {
  tj::RandomInputOptions opts;
  opts.seed = 1;
  for (const std::string& sym : tj::size_symbols(g)) opts.sizes[sym] = kSymbolValue;
  std::set<const tj::Graph*> seen;
  Size s;
  measure(g, opts.sizes, seen, s);
  if (!s.runnable) return;
  if (verbose()) std::fprintf(stderr, "fuzz_ir: interpreting %lld nodes\n", static_cast<long long>(s.nodes));
  tj::Bindings inputs = tj::random_inputs(g, opts);
  for (tj::DType compute : {tj::DType::f32, tj::DType::f64}) {
    try {
      tj::interpret(g, inputs, {compute});
    } catch (const tj::Error&) {
      // Runtime errors (an index out of range, division by zero) are fine.
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInputBytes) return -1;  // -1: not added to the corpus
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    tj::Graph g = tj::parse_graph(text);
    tj::verify(g);
    std::string printed = tj::print_graph(g);
    tj::Graph again;
    try {
      again = tj::parse_graph(printed);
      tj::verify(again);
    } catch (const tj::Error& e) {
      finding(std::string("the printed graph does not parse back: ") + e.what(), printed);
    }
    std::string reprinted = tj::print_graph(again);
    if (reprinted != printed) finding("round trip changed the text; first print:", printed + "\nsecond print:\n" + reprinted);
    run_interpreter(g);
  } catch (const tj::Error& e) {
    // Bad input, reported clearly: the expected outcome for most inputs.
    if (verbose()) std::fprintf(stderr, "fuzz_ir: tj::Error: %s\n", e.what());
  } catch (const std::exception& e) {
    finding(std::string("an exception other than tj::Error: ") + e.what(), text);
  }
  return 0;
}
