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
tj::Graph load_graph(const std::string& path);     // errors carry FILE:LINE:COL
tj::DType dtype_arg(const std::string& s);
tj::Dim dim_arg(const std::string& text, const char* option);
std::pair<std::string, std::string> split_eq(const std::string& s, const char* what);
double parse_number(const std::string& s, const std::string& what);

struct TraceArgs {
  std::string model = "llama-layer", config = "tiny", mode = "prefill", tokens, kv_len, dtype = "f32";
  std::string ir;  // read this IR file instead of tracing a model
  int64_t layers = 0;
  int64_t batch = 1;
  bool flash = false;
};
void add_trace_options(CLI::App* c, TraceArgs& a);
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

}  // namespace tjc
