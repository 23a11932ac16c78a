#include "tune/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/gemm.h"
#include "runtime/thread_pool.h"
#include "support/paths.h"
#include "support/timing.h"
#include "tensorjit/error.h"

namespace tj {

namespace {

// A peak is the fastest of a few calls (the others met interference).
template <class F>
double best_seconds(int reps, F f) {
  return time_calls(f, reps, 0).min;
}

// The runtime's single-threaded f32 GEMM on column blocks over the pool:
// how generated code runs a large matmul.
double measure_sgemm() {
  const int n = 1024;
  std::vector<float> a(static_cast<size_t>(n) * n, 1.0f), b(a.size(), 0.5f), c(a.size());
  auto run = [&] {
    ThreadPool::global().run_parts(ThreadPool::global().threads(), [&](int64_t p, int64_t parts, int) {
      const int n0 = static_cast<int>(n * p / parts / 16 * 16), n1 = p + 1 == parts ? n : static_cast<int>(n * (p + 1) / parts / 16 * 16);
      if (n1 > n0)
        gemm_f32(false, false, n, n1 - n0, n, a.data(), n, b.data() + n0, n, c.data() + n0, n);
    });
  };
  run();  // warm up threads and pages
  return 2.0 * n * n * n / best_seconds(7, run);
}

}  // namespace

double measure_stream_bandwidth() {
  const size_t n = size_t{16} << 20;  // 64 MiB per array
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  const float s = 3.0f;
  auto triad = [&] {
    ThreadPool::global().run_parts(ThreadPool::global().threads(), [&](int64_t p, int64_t parts, int) {
      for (size_t i = n * p / parts; i < n * (p + 1) / parts; ++i) a[i] = b[i] + s * c[i];
    });
  };
  triad();
  return 3.0 * static_cast<double>(n) * sizeof(float) / best_seconds(7, triad);
}

namespace {

double measure_vector() {
  const int n = 4096, iters = 2000;
  const int threads = ThreadPool::global().threads();
  std::vector<float> x(static_cast<size_t>(n) * threads, 1.0f);
  auto run = [&] {
    ThreadPool::global().run_parts(threads, [&](int64_t part, int64_t, int) {
      float* p = x.data() + static_cast<size_t>(part) * n;
      for (int it = 0; it < iters; ++it)
#pragma omp simd
        for (int i = 0; i < n; ++i) p[i] = p[i] * 0.999f + 0.001f;
    });
  };
  run();
  return 2.0 * n * iters * threads / best_seconds(5, run);
}

}  // namespace

std::string machine_identity() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, name = "unknown CPU", family = "?", model = "?";
  auto value = [](const std::string& l) {  // "model name\t: Intel(R) ..." -> "Intel(R) ..."
    size_t at = l.find_first_not_of(" \t", l.find(':') == std::string::npos ? l.size() : l.find(':') + 1);
    return at == std::string::npos ? std::string() : l.substr(at);
  };
  while (std::getline(f, line) && !line.empty()) {  // the first processor's block
    if (line.rfind("model name", 0) == 0) name = value(line);
    else if (line.rfind("cpu family", 0) == 0) family = value(line);
    else if (line.rfind("model", 0) == 0 && line.find("name") == std::string::npos) model = value(line);
  }
  return name + " (family " + family + " model " + model + "), " + std::to_string(ThreadPool::global().threads()) + " threads, " +
         gemm_f32_library();
}

Calibration measure_machine() {
  Calibration c;
  c.machine = machine_identity();
  c.threads = ThreadPool::global().threads();
  c.sgemm_flops = measure_sgemm();
  c.stream_bandwidth = measure_stream_bandwidth();
  c.vector_flops = measure_vector();
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  c.date = buf;
  return c;
}

std::string calibration_path() { return (std::filesystem::path(cache_dir()) / "calibration.json").string(); }

bool load_calibration(Calibration* out) {
  std::ifstream f(calibration_path());
  if (!f) return false;
  try {
    auto j = nlohmann::json::parse(f);
    Calibration c;
    c.sgemm_flops = j.at("sgemm_flops").get<double>();
    c.stream_bandwidth = j.at("stream_bandwidth").get<double>();
    c.vector_flops = j.at("vector_flops").get<double>();
    c.threads = j.at("threads").get<int>();
    c.date = j.at("date").get<std::string>();
    c.machine = j.value("machine", "");
    if (c.sgemm_flops <= 0 || c.stream_bandwidth <= 0 || c.vector_flops <= 0) return false;
    if (c.machine != machine_identity()) return false;  // measured elsewhere (or before the file said where)
    *out = c;
    return true;
  } catch (const std::exception&) {
    return false;  // corrupt: measure again
  }
}

void save_calibration(const Calibration& c) {
  namespace fs = std::filesystem;
  fs::path path = calibration_path();
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  nlohmann::json j = {{"sgemm_flops", c.sgemm_flops}, {"stream_bandwidth", c.stream_bandwidth},
                      {"vector_flops", c.vector_flops}, {"threads", c.threads}, {"machine", c.machine}, {"date", c.date}};
  fs::path tmp = path;
  tmp += ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp);
    if (!f) throw Error("cannot write " + tmp.string());
    f << j.dump(2) << "\n";
  }
  fs::rename(tmp, path, ec);
  if (ec) throw Error("cannot write " + path.string() + ": " + ec.message());
}

HardwareProfile cpu_profile(const Calibration& c) {
  return {"cpu", c.sgemm_flops, c.sgemm_flops, c.vector_flops, c.stream_bandwidth, 2e-6,
          "measured by tjc calibrate on " + c.date + " (" + std::to_string(c.threads) + " threads)"};
}

HardwareProfile hardware_profile(const std::string& name) {
  if (auto p = datasheet_profile(name)) return *p;
  if (name != "cpu") throw Error("unknown hardware '" + name + "' (known: h100, h200, a100, cpu)");
  Calibration c;
  if (!load_calibration(&c)) {
    c = measure_machine();
    save_calibration(c);
  }
  return cpu_profile(c);
}

std::vector<std::string> hardware_names() {
  std::vector<std::string> names = datasheet_names();
  names.push_back("cpu");
  return names;
}

}  // namespace tj
