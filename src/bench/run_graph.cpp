#include "bench/run_graph.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>

#include "bench/args.h"
#include "compiler/compile.h"
#include "compiler/model_cache.h"
#include "frontend/onnx/import.h"
#include "io/npy.h"
#include "ir/text.h"
#include "ir/verifier.h"
#include "reference/interpreter.h"
#include "reference/random_inputs.h"
#include "runtime/gemm.h"
#include "support/timing.h"
#include "tensorjit/compile.h"
#include "tensorjit/error.h"
#include "tensorjit/safetensors.h"

namespace tj::bench {

namespace {

void print_outputs(const std::vector<NDArray>& outs) {
  for (size_t i = 0; i < outs.size(); ++i) {
    const NDArray& a = outs[i];
    double sum = 0, l2 = 0;
    for (int64_t k = 0; k < a.numel(); ++k) {
      double v = a.get(k);
      sum += v;
      l2 += v * v;
    }
    std::printf("output %zu: %s sum=%.10g l2=%.10g\n", i, a.type_str().c_str(), sum, std::sqrt(l2));
  }
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "none" : s;
}

// Binds the plain-symbol dims of `type` from `shape` into `sizes`; constant
// dims must match. Other dims are checked when the graph runs.
// `what` names the source in errors ("--input x").
void bind_from_shape(const std::string& what, const Type& type, const std::vector<int64_t>& shape, SymEnv& sizes) {
  if (shape.size() != type.shape.size())
    throw Error(what + ": rank " + std::to_string(shape.size()) + " given, the input is " + type.str());
  for (size_t d = 0; d < shape.size(); ++d) {
    const Dim& dim = type.shape[d];
    if (shape[d] > kMaxSize) throw Error(what + ": dimension " + std::to_string(shape[d]) + " is too large");
    if (auto c = dim.as_const()) {
      if (*c != shape[d]) throw Error(what + ": shape " + shape_str({shape.begin(), shape.end()}) + " given, the input is " + type.str());
      continue;
    }
    auto syms = dim.symbols();
    if (syms.size() != 1 || dim != Dim::symbol(syms[0])) continue;
    auto [it, fresh] = sizes.emplace(syms[0], shape[d]);
    if (!fresh && it->second != shape[d])
      throw Error(what + ": " + syms[0] + " = " + std::to_string(shape[d]) + " here, but " + std::to_string(it->second) +
                  " elsewhere");
  }
}

// The inputs of a run: seeded random values, --set and --input applied.
// `bound`: names the caller binds itself (no random values are made for them).
Bindings make_inputs(const Graph& g, const GraphRunOptions& a, const std::set<std::string, std::less<>>& bound = {}) {
  RandomInputOptions ro;
  ro.seed = a.seed;
  ro.given = bound;
  std::vector<std::string> symbols = size_symbols(g);
  for (const auto& s : a.syms) {
    auto [k, v] = split_eq(s, "--sym");
    if (std::find(symbols.begin(), symbols.end(), k) == symbols.end())
      throw Error("--sym: the graph has no size symbol '" + k + "' (its symbols: " + joined(symbols) + ")");
    ro.sizes[k] = size_arg(v, "--sym " + k);
  }
  // Given inputs: .npy arrays and safetensors tensors now; value lists once
  // the sizes are known.
  Bindings given;
  std::vector<std::pair<std::string, std::vector<std::string>>> lists;
  for (const auto& path : a.weights) {
    SafetensorsFile f(path);
    size_t used = 0;
    for (const auto& t : f.tensors()) {
      ValueId id = g.find(t.name);
      if (id < 0) continue;  // a checkpoint often holds more than one graph reads
      const Type& ty = g.type(id);
      if (t.dtype != ty.dtype)
        throw Error("--weights " + path + ": tensor '" + t.name + "' is " + std::string(dtype_name(t.dtype)) + ", the graph's " +
                    t.name + " is " + ty.str());
      if (given.count(t.name)) throw Error("--weights: tensor '" + t.name + "' given twice");
      bind_from_shape("--weights " + path + ": tensor '" + t.name + "'", ty, t.shape, ro.sizes);
      given[t.name] = f.read(t.name);
      ++used;
    }
    if (used == 0) throw Error("--weights " + path + ": none of its " + std::to_string(f.tensors().size()) + " tensors names an input or param of the graph");
  }
  for (const auto& s : a.inputs) {
    const auto [k, v] = split_eq(s, "--input");
    const std::string& name = k;  // clang 14 does not capture structured bindings
    ValueId id = g.find(k);
    if (id < 0) throw Error("--input: the graph has no input or param named '" + k + "'");
    const Type& t = g.type(id);
    if (given.count(k) || std::any_of(lists.begin(), lists.end(), [&](const auto& l) { return l.first == name; }))
      throw Error("--input " + k + " given twice");
    if (ends_with(v, ".npy")) {
      NDArray arr = read_npy(v);
      if (arr.dtype() != t.dtype) {
        if (!(t.dtype == DType::bf16 && is_float(arr.dtype())))
          throw Error("--input " + k + ": " + v + " holds " + std::string(dtype_name(arr.dtype())) + ", the input is " + t.str());
        NDArray conv(t.dtype, arr.shape());
        for (int64_t i = 0; i < arr.numel(); ++i) conv.set(i, arr.get(i));
        arr = std::move(conv);
      }
      bind_from_shape("--input " + k, t, arr.shape(), ro.sizes);
      given[k] = std::move(arr);
    } else {
      std::vector<std::string> values = split_on(v, ',');
      if (t.shape.size() == 1) bind_from_shape("--input " + k, t, {static_cast<int64_t>(values.size())}, ro.sizes);
      lists.emplace_back(k, std::move(values));
    }
  }
  for (auto& [k, values] : lists) {
    const Type& t = g.type(g.find(k));
    std::vector<int64_t> shape;
    try {
      shape = eval_shape(t.shape, ro.sizes);
    } catch (const Error& e) {
      throw Error("--input " + k + ": the input is " + t.str() + ": give its sizes with --sym (" + e.what() + ")");
    }
    NDArray arr(t.dtype, shape);
    if (static_cast<int64_t>(values.size()) != arr.numel())
      throw Error("--input " + k + ": " + std::to_string(values.size()) + " values given, " + t.str() + " has " +
                  std::to_string(arr.numel()) + (t.shape.empty() ? " (a scalar takes one value)" : ""));
    for (int64_t i = 0; i < arr.numel(); ++i) set_element(arr, i, values[static_cast<size_t>(i)], "--input " + k);
    given[k] = std::move(arr);
  }
  // --set fills an input with one value (kept in ro.fixed too, so that the
  // random values of the others stay as they were).
  Bindings sets;
  for (const auto& s : a.sets) {
    auto [k, v] = split_eq(s, "--set");
    ValueId id = g.find(k);
    if (id < 0) throw Error("--set: the graph has no input named '" + k + "'");
    NDArray one(g.type(id).dtype, {});
    set_element(one, 0, v, "--set " + k);
    ro.fixed[k] = one.get(0);
    sets[k] = std::move(one);
  }
  for (const auto& [k, arr] : given) ro.given.insert(k);
  for (const auto& [k, values] : lists) ro.given.insert(k);
  Bindings in = random_inputs(g, ro);
  for (auto& [k, one] : sets) {
    if (!in.count(k)) continue;  // also given (--input): that value wins, as below
    NDArray& arr = in.at(k);
    size_t elem = static_cast<size_t>(dtype_size(arr.dtype()));
    for (int64_t i = 0; i < arr.numel(); ++i)
      std::memcpy(static_cast<char*>(arr.raw()) + static_cast<size_t>(i) * elem, one.raw(), elem);
  }
  for (auto& [k, arr] : given) in[k] = std::move(arr);
  return in;
}

// `program_key`, if given, gets the compilation's program cache key.
std::vector<NDArray> run_compiled(const Graph& g, Bindings in, DType weights, Device device, std::string* program_key = nullptr) {
  Bindings params;
  for (ValueId p : g.params()) {
    auto it = in.find(g.node(p).name);
    params[it->first] = std::move(it->second);
    in.erase(it);
  }
  CompileOptions co;
  co.weights = weights;
  co.device = device;
  Executable exe = tj::compile(g, params, co);
  if (!exe.stats().compiled) throw Error("run --compiled: no C++ compiler found");
  if (program_key) *program_key = exe.stats().program_key;
  std::vector<NDArray> outs;
  exe.run(in, outs);
  return outs;
}

// Per output: the largest differences of the compiled run from the
// interpreter. True when they agree (see docs/cli.md for the tolerance).
bool check_outputs(const std::vector<NDArray>& want, const std::vector<NDArray>& got, double tol_arg) {
  if (want.size() != got.size()) throw Error("run --check: the compiled code returned " + std::to_string(got.size()) + " outputs, not " +
                                             std::to_string(want.size()));
  bool ok = true;
  for (size_t i = 0; i < want.size(); ++i) {
    const NDArray &w = want[i], &c = got[i];
    if (w.shape() != c.shape()) throw Error("run --check: output " + std::to_string(i) + " is " + w.type_str() + " interpreted but " +
                                            c.type_str() + " compiled");
    bool exact = !is_float(c.dtype()) || !is_float(w.dtype());
    // By the coarser of the two: the interpreter's outputs are in its compute dtype.
    auto coarse = [&](DType t) { return c.dtype() == t || w.dtype() == t; };
    // float8/float4: a unit in the last place is 2^-3 (e4m3) or 2^-2 (e5m2, e2m1) of the value.
    const bool mini = is_minifloat(c.dtype()) || is_minifloat(w.dtype());
    double tol = tol_arg >= 0 ? tol_arg : mini ? 0.25 : coarse(DType::f16) || coarse(DType::bf16) ? 1e-2 : coarse(DType::f32) ? 1e-4 : 1e-9;
    double max_abs = 0, scale = 0;
    int64_t nan_mismatch = 0, differing = 0;
    bool identical = true;
    for (int64_t k = 0; k < w.numel(); ++k) {
      double x = w.get(k), y = c.get(k);
      if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
      if (std::isnan(x) && std::isnan(y)) continue;
      if (std::bit_cast<uint64_t>(x) != std::bit_cast<uint64_t>(y)) identical = false;
      if (std::isnan(x) != std::isnan(y)) {
        ++nan_mismatch, ++differing;
        max_abs = INFINITY;
      } else if (x != y) {
        ++differing;
        max_abs = std::max(max_abs, x == y ? 0.0 : std::isinf(x) || std::isinf(y) ? INFINITY : std::fabs(x - y));
      }
    }
    double max_rel = max_abs == 0 ? 0 : max_abs / std::max(scale, 1e-300);
    bool pass = nan_mismatch == 0 && (exact ? differing == 0 : max_abs <= tol * std::max(scale, 1.0));
    ok = ok && pass;
    std::printf("check output %zu: %s max_abs_diff=%.3g max_rel_diff=%.3g bit_identical=%s differing=%lld nan_mismatch=%lld %s\n", i,
                c.type_str().c_str(), max_abs, max_rel, identical ? "yes" : "no", (long long)differing, (long long)nan_mismatch,
                pass ? "ok" : exact ? "DIFFERENT (exact compare)" : "DIFFERENT (beyond tolerance)");
  }
  return ok;
}

// DIR/NAME.npy per output: the ONNX output names, else output0, output1, ...
void write_outputs(const std::string& dir, const std::vector<NDArray>& outs, const std::vector<std::string>& names) {
  make_folder(dir);
  for (size_t i = 0; i < outs.size(); ++i) {
    std::string name = i < names.size() ? names[i] : "output" + std::to_string(i);
    for (char& ch : name)
      if (ch == '/' || ch == '\\' || ch == ':') ch = '_';  // a file name, not a path
    write_npy((std::filesystem::path(dir) / (name + ".npy")).string(), outs[i]);
  }
}

// The ONNX model; one whose shapes, axes or counts are graph inputs is
// imported with their values (given by --input or --set, which are taken
// out of `a`) fixed: a specialization, as tj::OnnxFunction makes per value.
onnx_import::OnnxModel import_specialized(GraphRunOptions& a, bool* specialized) {
  *specialized = false;
  try {
    return onnx_import::import_file(a.file);
  } catch (const onnx_import::MustBeKnown& e) {
    Graph declared("inputs");
    for (const auto& [name, type] : e.inputs) declared.add_input(name, type);
    std::vector<std::string> small = e.deciding();
    auto given = [&](const std::string& name) {
      for (const auto* list : {&a.inputs, &a.sets})
        for (const auto& arg : *list)
          if (arg.substr(0, arg.find('=')) == name) return true;
      return false;
    };
    std::vector<std::string> fixed;
    for (const auto& name : small)
      if (given(name)) fixed.push_back(name);
    if (fixed.empty())
      throw Error(std::string(e.what()) + ": give the value of the input that decides it with --input NAME=FILE.npy or --set NAME=V (of " +
                  joined(small) + ")");
    Bindings values = make_inputs(declared, a);
    onnx_import::ImportOptions io;
    for (const auto& name : fixed) io.known_inputs[name] = values.at(name);
    std::fprintf(stderr, "specialized on the values of %s (they decide shapes)\n", joined(fixed).c_str());
    auto keep = [&](std::vector<std::string>& list) {
      std::erase_if(list, [&](const std::string& arg) {
        return std::find(fixed.begin(), fixed.end(), arg.substr(0, arg.find('='))) != fixed.end();
      });
    };
    keep(a.inputs), keep(a.sets);
    *specialized = true;
    return onnx_import::import_file(a.file, io);
  }
}

}  // namespace

void run_graph(GraphRunOptions a) {
  if (a.compiled && a.check) throw Error("run: --check runs both; give --compiled or --check, not both");
  if (a.interpret && (a.compiled || a.check)) throw Error("run: --interpret runs the interpreter only; not with --compiled or --check");
  // ONNX models run compiled unless --interpret says otherwise.
  if (ends_with(a.file, ".onnx") && !a.interpret && !a.check) a.compiled = true;
  // A compiled run of an ONNX model file seen before (as it is now, its own
  // weights): the program from the cache, without importing the file
  // (compiler/model_cache.h).
  const bool model_file = ends_with(a.file, ".onnx") && a.compiled && a.weights.empty();
  const DType format = weights_format(a.weight_format);
  if (format != DType::f32 && !a.compiled) throw Error("run: --weight-format applies to compiled runs (--compiled): --check compares with the "
                                                      "f32 interpreter; tjc bench --weights reports a format's error");
  const std::string variant = format == DType::f32 ? "" : "weights " + std::string(dtype_name(format));
  std::optional<GemmWarmup> warm;
  if (model_file) {
    // oneDNN makes its kernels (26-53 ms) while the entry is read and the
    // program loaded, not after them: a warm MiniLM-L6 run takes 67-103 ms.
    warm.emplace();
    std::optional<ModelEntry> entry = load_model_entry(a.file, variant);
    // --input and --set must name graph inputs (one naming an initializer,
    // or nothing in the graph, is for the import path to judge).
    std::vector<std::string> named = a.inputs;
    named.insert(named.end(), a.sets.begin(), a.sets.end());
    for (const auto& arg : named) {
      ValueId id = entry ? entry->graph.find(arg.substr(0, arg.find('='))) : -1;
      if (id < 0 || entry->graph.node(id).op != Op::input) entry.reset();
    }
    if (entry) {
      auto t0 = Clock::now();
      if (std::optional<Executable> exe = tj::compile_prepared(entry->program_key)) {
        const Graph& g = entry->graph;
        verify(g);
        std::set<std::string, std::less<>> weights;
        for (ValueId p : g.params()) weights.insert(g.node(p).name);
        if (!a.output.empty()) make_folder(a.output);
        Bindings in = make_inputs(g, a, weights);
        std::vector<NDArray> outs;
        exe->run(in, outs);
        print_outputs(outs);
        std::fprintf(stderr, "compiled and ran %zu nodes in %.3f s (the model's program from the cache)\n", g.size(), seconds_since(t0));
        if (!a.output.empty()) write_outputs(a.output, outs, entry->output_names);
        return;
      }
    }
  }
  // An ONNX model brings its weights (the initializers), unless --weights
  // gives others; random ones otherwise.
  std::optional<onnx_import::OnnxModel> onnx;
  bool specialized = false;  // then not the file's program: not for the model cache
  if (ends_with(a.file, ".onnx")) onnx = import_specialized(a, &specialized);
  Graph g = onnx ? onnx->graph : load_graph(a.file);
  verify(g);
  if (!a.output.empty()) make_folder(a.output);  // before the work, so that a bad folder fails fast
  std::set<std::string, std::less<>> initializers;
  if (onnx && a.weights.empty())
    for (const auto& [name, w] : onnx->params) initializers.insert(name);
  Bindings in = make_inputs(g, a, initializers);
  if (onnx && a.weights.empty())
    for (auto& [name, w] : onnx->params) in[name] = std::move(w);
  // Compiled first, on its own copy: the interpreter must still see the
  // caches as they were given, not as kv_write left them in place.
  std::vector<NDArray> compiled;
  if (a.check) compiled = run_compiled(g, in, format, parse_device(a.device));
  auto t0 = Clock::now();
  std::vector<NDArray> outs;
  if (!a.compiled) outs = interpret(g, in, {dtype_arg(a.dtype)});
  double dt = seconds_since(t0);
  if (a.compiled) {
    std::string key;
    outs = run_compiled(g, in, format, parse_device(a.device), &key);
    dt = seconds_since(t0);
    if (model_file && !onnx->external_data && !specialized) store_model_entry(a.file, g, onnx->output_names, key, variant);
  }
  print_outputs(outs);
  if (a.compiled) std::fprintf(stderr, "compiled and ran %zu nodes in %.3f s\n", g.size(), dt);
  else std::fprintf(stderr, "interpreted %zu nodes in %.3f ms (%s)\n", g.size(), dt * 1e3, a.dtype.c_str());
  if (!a.output.empty()) write_outputs(a.output, outs, onnx ? onnx->output_names : std::vector<std::string>{});
  if (a.check && !check_outputs(outs, compiled, a.tol)) throw Error("outputs differ");
}

}  // namespace tj::bench
