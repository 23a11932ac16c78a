#include "runtime/gemm.h"

#include <cblas.h>
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>

#include <atomic>
#include <string>
#include <system_error>

namespace tj {

OneOpenMpThread::OneOpenMpThread() {
  if (api().set && (was_ = api().get()) != 1) api().set(1);
}

OneOpenMpThread::~OneOpenMpThread() {
  if (api().set && was_ != 1) api().set(was_);
}

// Looked up in the OpenMP runtime oneDNN loaded (not linked here: a clang
// build may link another OpenMP runtime); a oneDNN built without OpenMP
// needs nothing.
const OneOpenMpThread::Api& OneOpenMpThread::api() {
  static const Api a = [] {
    Api r;
    if (void* gomp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD)) {
      r.set = reinterpret_cast<void (*)(int)>(dlsym(gomp, "omp_set_num_threads"));
      r.get = reinterpret_cast<int (*)()>(dlsym(gomp, "omp_get_max_threads"));
      if (!r.get) r.set = nullptr;
    }
    return r;
  }();
  return a;
}

int gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc) {
  OneOpenMpThread one;
  return static_cast<int>(dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc));
}

int gemm_f64(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
              int64_t ldb, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), 0.0, c,
              static_cast<blasint>(ldc));
  return 0;
}

GemmWarmup::GemmWarmup() {
  static std::atomic<bool> started{false};
  if (started.exchange(true)) return;
  try {
    thread_ = std::thread([] {
      float a[32 * 32] = {}, b[32 * 32] = {}, c[32 * 32];
      gemm_f32(false, false, 32, 32, 32, a, 32, b, 32, c, 32);
    });
  } catch (const std::system_error&) {  // no thread to be had: the first product pays
  }
}

GemmWarmup::~GemmWarmup() {
  if (thread_.joinable()) thread_.join();
}

const char* gemm_f32_library() {
  static const std::string name = [] {
    const dnnl_version_t* v = dnnl_version();
    const char* isa = "?";
    switch (dnnl_get_effective_cpu_isa()) {
      case dnnl_cpu_isa_sse41: isa = "sse41"; break;
      case dnnl_cpu_isa_avx: isa = "avx"; break;
      case dnnl_cpu_isa_avx2: isa = "avx2"; break;
      case dnnl_cpu_isa_avx2_vnni: isa = "avx2_vnni"; break;
      case dnnl_cpu_isa_avx512_core: isa = "avx512_core"; break;
      case dnnl_cpu_isa_avx512_core_vnni: isa = "avx512_core_vnni"; break;
      case dnnl_cpu_isa_avx512_core_bf16: isa = "avx512_core_bf16"; break;
      case dnnl_cpu_isa_avx512_core_amx: isa = "avx512_core_amx"; break;
      default: break;
    }
    return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) + " (" + isa + ")";
  }();
  return name.c_str();
}

}  // namespace tj
