// The JIT layer: a C++ function of tensors and plain values, traced on its
// first call with each new kind of argument, compiled, and cached under the
// guards that say when the compiled graph is valid.
//
//   auto f = tj::jit("mlp", [&](tj::JitArgs& a) {
//     auto x = a.tensor(0);
//     auto y = tj::matmul(x, a.param("w", w));
//     if (a.flag(0)) y = tj::silu(y);      // the flag's value becomes a guard
//     return std::vector<tj::Tensor>{y};
//   });
//   std::vector<tj::NDArray> out = f({x_array}, {true});
//
// A call computes its guard key from the arguments: dtype, rank and every dim
// of each tensor (an exact size, a bucket, or "at least 2" for a symbolic dim,
// and the equalities the trace assumed between dynamic dims), and the value
// of every plain argument the trace read. By default a dim is static until it
// shows a second value, then symbolic: one compilation for every size. A hit runs the cached executable; a miss traces, compiles and
// caches (up to a limit, then runs on the interpreter with a warning).
// explain() lists the entries with their guards and, for each recompilation,
// which guard failed and why.
//
// Reading a tensor's value while tracing (item(), or a tensor in a bool
// context) is a graph break: the graph so far is compiled and run, the value
// goes back to the C++ code, and tracing continues into a new graph. A
// function that breaks is traced again on every call (its control flow
// depends on values); its graphs are compiled once each and cached.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tensorjit/ndarray.h"
#include "tensorjit/tensor.h"

namespace tj {

class SafetensorsFile;  // tensorjit/safetensors.h

// How a tensor dim may vary between calls of one compiled entry.
enum class DynamicPolicy {
  static_shapes,  // a compilation per distinct size
  bucketed,       // sizes padded up to a bucket; the function masks with real_size()
  symbolic,       // one compilation for every size >= 2 (0 and 1 are specialized)
  automatic,      // static until the dim shows a second value, then symbolic
};

struct Buckets {
  int64_t multiple = 0;  // 0: powers of two; k > 0: multiples of k
  int64_t of(int64_t size) const;  // the bucket of a size >= 2
};

struct DimPolicy {
  size_t tensor = 0;
  int axis = 0;
  DynamicPolicy policy = DynamicPolicy::bucketed;
};

struct JitOptions {
  DynamicPolicy policy = DynamicPolicy::automatic;  // every dim not listed in `dims`
  std::vector<DimPolicy> dims;                          // per-dim overrides
  Buckets buckets;
  size_t cache_limit = 8;     // compiled entries (and compiled graphs of a breaking function)
  bool compile = true;        // false: run every graph on the interpreter (same guards and breaks)
  // The matrix products' weights (params) stored as f32, bf16 or i8 with a
  // scale per output channel, read converted (AotOptions::weights).
  DType weights = DType::f32;
  // Where compiled graphs run (AotOptions::device); empty: $TJ_DEVICE, else the CPU.
  std::string device;
  // Non-empty: differentiate. The function returns one scalar; a call
  // returns it, then its gradient with respect to each of these tensor
  // arguments (reverse mode, compiled with the forward). A function that
  // breaks the graph, or bucketed shapes, cannot be differentiated.
  std::vector<size_t> grad_wrt;
};

using JitValue = std::variant<int64_t, double, bool>;

// What the traced function sees: its arguments as proxies and plain values.
class JitArgs {
 public:
  Tensor tensor(size_t i);
  // The value of plain argument i; reading it makes its value a guard.
  int64_t integer(size_t i);
  double number(size_t i);
  bool flag(size_t i);
  // The same by name, for a function called with named arguments.
  Tensor tensor(std::string_view name);
  int64_t integer(std::string_view name);
  double number(std::string_view name);
  bool flag(std::string_view name);
  // The real (unpadded) size of tensor i's axis as an i64 scalar tensor: what
  // a function masks padded positions with under bucketing.
  Tensor real_size(size_t i, int axis);
  // A weight: held by the executable (frozen into the compilation): an
  // owned array is copied once, a view is read in place (its memory must
  // stay unchanged while the function lives).
  Tensor param(const std::string& name, const NDArray& value);
  // The weight of that name in a safetensors file (its dtype and shape).
  Tensor param(const std::string& name, const SafetensorsFile& weights);
  Tracer& tracer();

  struct State;
  explicit JitArgs(State* s) : s_(s) {}

 private:
  State* s_;
};

using JitFn = std::function<std::vector<Tensor>(JitArgs&)>;
using JitFn1 = std::function<Tensor(JitArgs&)>;  // a function of one result

struct JitStats {
  int64_t calls = 0, hits = 0, compilations = 0, eager_calls = 0;
  int64_t graph_breaks = 0;    // over all calls
  int64_t graphs_run = 0;      // graphs executed over all calls (1 per call without breaks)
  double compile_seconds = 0;  // tracing, optimizing and building, all misses
};

// What explain() says, as data (for a caller that formats it its own way,
// as the Python binding does).
struct JitExplanation {
  std::string name;
  JitStats stats;
  size_t cache_limit = 0;
  bool breaks_graph = false;  // reads tensor values: traced on every call
  size_t distinct_graphs = 0;  // compiled, when it breaks the graph
  struct Entry {
    int64_t id = 0, compiled_at = 0;  // its index; the call that compiled it
    std::vector<std::string> guards;  // one line each
  };
  std::vector<Entry> entries;
  std::vector<std::pair<std::string, int64_t>> break_sites;  // where a value was read (C++ source location), times
  std::vector<std::string> history;  // recompilations and other notes, oldest first
  int64_t dropped_notes = 0;         // later notes not kept
};

class JitFunction {
 public:
  JitFunction(std::string name, JitFn fn, JitOptions options);

  // `tensors` may be updated in place (donated KV caches): use the outputs.
  std::vector<NDArray> operator()(std::vector<NDArray>& tensors, const std::vector<JitValue>& values = {});
  std::vector<NDArray> operator()(std::vector<NDArray>&& tensors, const std::vector<JitValue>& values = {});
  // Named arguments (JitArgs::tensor("x")): every call passes the same names.
  // Donated caches are updated in `tensors` as in a positional call.
  using NamedValues = std::map<std::string, JitValue, std::less<>>;
  std::vector<NDArray> operator()(Bindings& tensors, const NamedValues& values = {});
  std::vector<NDArray> operator()(Bindings&& tensors, const NamedValues& values = {});

  // True when the arguments pass the guards of a cached entry (no tracing).
  bool would_hit(const std::vector<NDArray>& tensors, const std::vector<JitValue>& values = {}) const;
  // A hit or nothing, for a caller's fast path: runs the call on the cached
  // entry whose guards pass, its outputs into `out`, and returns that
  // entry's index; or returns -1 having run and traced nothing (a miss, or a
  // function that breaks the graph). The tensors are given up, as in the
  // rvalue call: a donated cache moves into its output.
  int call_cached(std::vector<NDArray>&& tensors, const std::vector<JitValue>& values, std::vector<NDArray>& out);
  // The entry the latest call ran (its index, stable: entries are only
  // added), or -1 when it ran a fresh trace (a function that breaks the
  // graph, or past the cache limit).
  int last_entry() const;
  const JitStats& stats() const;
  // The cached entries, their guards, each recompilation and graph break.
  std::string explain() const;
  JitExplanation explanation() const;  // the same, as data

  struct Impl;

 private:
  std::shared_ptr<Impl> p_;
};

JitFunction jit(std::string name, JitFn fn, JitOptions options = {});
JitFunction jit(std::string name, JitFn1 fn, JitOptions options = {});

}  // namespace tj
