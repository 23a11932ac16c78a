// Runs an ONNX model with tensorjit's public API and times the start: the
// first run of a file imports and compiles it, later runs (other processes
// included) take the program from the cache (TJ_CACHE_DIR).
//   onnx_run model.onnx [dim=size ...]
// Inputs are made up: integer inputs named like masks are 1, input_ids are
// token ids 1..999, other integers 0, floats 0.5; symbolic dims default to 8.
#include <tensorjit/onnx.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s model.onnx [dim=size ...]\n", argv[0]);
    return 2;
  }
  std::map<std::string, int64_t> sizes;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto eq = a.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "bad argument '%s': expected dim=size\n", argv[i]);
      return 2;
    }
    sizes[a.substr(0, eq)] = std::stoll(a.substr(eq + 1));
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    tj::OnnxProgram m = tj::compile_onnx(argv[1]);
    double start_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    tj::Bindings in;
    for (const tj::Port& p : m.program.inputs()) {
      std::vector<int64_t> shape;
      for (const tj::Dim& d : p.type.shape) shape.push_back(d.is_const() ? d.value() : (sizes.count(d.str()) ? sizes[d.str()] : 8));
      tj::NDArray a(p.type.dtype, shape);
      const bool mask = p.name.find("mask") != std::string::npos, ids = p.name.find("input_ids") != std::string::npos;
      for (int64_t k = 0; k < a.numel(); ++k)
        a.set(k, tj::is_float(p.type.dtype) ? 0.5 : mask ? 1.0 : ids ? double(1 + k * 37 % 999) : 0.0);
      in.emplace(p.name, std::move(a));
    }
    auto t1 = std::chrono::steady_clock::now();
    std::vector<tj::NDArray> out = m.program.run(in);
    double run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
    for (size_t i = 0; i < out.size(); ++i)
      std::printf("%s: %s, first value %.6g\n", m.output_names[i].c_str(), out[i].type_str().c_str(), out[i].numel() ? out[i].get(0) : 0.0);
    std::printf("%s in %.1f ms (%s), first run %.1f ms\n", m.imported ? "imported and compiled" : "loaded from the cache", start_ms,
                m.program.compiled() ? "compiled" : "interpreted", run_ms);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "onnx_run: %s\n", e.what());
    return 1;
  }
  return 0;
}
