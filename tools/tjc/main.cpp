// tjc: the tensorjit command line. Each subcommand registers itself (its
// options and a callback) from its own file; errors become a message and a
// non-zero exit, never a crash.
#include <cstdio>
#include <filesystem>
#include <new>

#include "tensorjit/error.h"
#include "tjc/common.h"

int main(int argc, char** argv) {
  CLI::App app{"tjc: the tensorjit compiler driver"};
  app.require_subcommand(1);
  tjc::add_trace_command(app);
  tjc::add_fmt_command(app);
  tjc::add_run_command(app);
  tjc::add_opt_commands(app);
  tjc::add_analysis_commands(app);
  tjc::add_bench_commands(app);
  tjc::add_demo_command(app);
  tjc::add_dynamic_demo_command(app);
  tjc::add_onnx_commands(app);
  tjc::add_train_command(app);
  tjc::add_grad_command(app);
  tjc::add_devices_command(app);
  tjc::add_partition_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;  // --help is 0; bad arguments are 1, as other errors
  } catch (const tj::Error& e) {
    std::fprintf(stderr, "tjc: error: %s\n", e.what());
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    std::fprintf(stderr, "tjc: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tjc: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tjc: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
