// Shared pieces of the tjc subcommands: argument helpers, IR loading, model tracing.
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "tensorjit/ndarray.h"

namespace tjc {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0);

std::string read_source(const std::string& path);  // "-" is stdin
tj::Graph load_graph(const std::string& path);     // IR text (errors carry FILE:LINE:COL) or an .onnx model
tj::DType dtype_arg(const std::string& s);
tj::Dim dim_arg(const std::string& text, const char* option);
std::pair<std::string, std::string> split_eq(const std::string& s, const char* what);
double parse_number(const std::string& s, const std::string& what);

// Numeric arguments, checked: an integer in [lo, hi] (decimal, exact, no
// fraction or exponent), or "WHAT: 'S' is not ..." as a tj::Error.
int64_t int_arg(const std::string& s, const std::string& what, int64_t lo, int64_t hi);
constexpr int64_t kMaxSize = int64_t{1} << 40;  // --sym, and sizes bound from given inputs
int64_t size_arg(const std::string& s, const std::string& what);  // 0 .. kMaxSize
// Element k of `a` from text, as suits a's dtype: integers exact and in range
// (i32, i64), bool 0/1/true/false, floats any number or nan/inf/-inf (finite
// values must be finite in the dtype).
void set_element(tj::NDArray& a, int64_t k, const std::string& text, const std::string& what);
// A CLI11 check: a finite number in [lo, hi] (CLI::Range lets NaN through).
CLI::Validator finite_range(double lo, double hi);
// A CLI11 check for seeds: a decimal integer in 0 .. 2^64-1 (CLI11 wraps "-1").
CLI::Validator seed_check();
// Creates `dir` (and parents) or throws "cannot create folder 'DIR': why".
void make_folder(const std::string& dir);

// Bounds of the trace options, so that no size product overflows downstream.
constexpr int64_t kMaxLayers = 1024, kMaxBatch = 1024, kMaxTokens = int64_t{1} << 20;

struct TraceArgs {
  std::string model = "llama-layer", config = "tiny", mode = "prefill", tokens, kv_len, dtype = "f32";
  std::string ir;  // read this IR file (or .onnx model) instead of tracing a model
  // With --ir: sizes of its symbolic dims (NAME=N) and scalar values of
  // inputs (NAME=V), for the commands that make inputs (bench, codegen).
  std::vector<std::string> syms, sets;
  int64_t layers = 0;
  int64_t batch = 1;
  bool flash = false;
  std::string weights = "f32";  // the compiled products' weight format (add_weights_option)
  std::string device = "cpu";   // where compiled code runs (add_device_option)
};
void add_trace_options(CLI::App* c, TraceArgs& a);
void add_size_options(CLI::App* c, TraceArgs& a);  // --sym, --set
// --weights (alias --weight-format): f32, bf16 or int8; more names ("all") in `extra`.
void add_weights_option(CLI::App* c, std::string& format, std::vector<std::string> extra = {});
// --device: a name of tj::device_names() (compiled code; a device that is not here is an error).
void add_device_option(CLI::App* c, std::string& device);
// The options that give `a` again, for a fresh tjc process.
std::vector<std::string> trace_argv(const TraceArgs& a);
tj::Graph trace_model(const TraceArgs& a);

// Subcommands.
void add_trace_command(CLI::App& app);
void add_fmt_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_opt_commands(CLI::App& app);
void add_analysis_commands(CLI::App& app);
void add_bench_commands(CLI::App& app);
void add_dynamic_demo_command(CLI::App& app);
void add_onnx_commands(CLI::App& app);
void add_train_command(CLI::App& app);
void add_grad_command(CLI::App& app);
void add_devices_command(CLI::App& app);

}  // namespace tjc
