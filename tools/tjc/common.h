// Shared pieces of the tjc subcommands: the options of a model spec, CLI11 checks.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "bench/args.h"
#include "bench/model.h"
#include "support/timing.h"

namespace tjc {

// The text-to-value helpers and the model specs are the bench library's
// (src/bench), shared with the tests; tjc adds the command-line options.
using namespace tj::bench;

// A CLI11 check: a finite number in [lo, hi] (CLI::Range lets NaN through).
CLI::Validator finite_range(double lo, double hi);
// A CLI11 check for seeds: a decimal integer in 0 .. 2^64-1 (CLI11 wraps "-1").
CLI::Validator seed_check();

void add_trace_options(CLI::App* c, ModelSpec& a);
void add_size_options(CLI::App* c, ModelSpec& a);  // --sym, --set
// --weights (alias --weight-format): f32, bf16 or int8; more names ("all") in `extra`.
void add_weights_option(CLI::App* c, std::string& format, std::vector<std::string> extra = {});
// --device: a name of tj::device_names() (compiled code; a device that is not here is an error).
void add_device_option(CLI::App* c, std::string& device);

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
void add_partition_command(CLI::App& app);

}  // namespace tjc
