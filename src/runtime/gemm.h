// Matrix products for generated code and calibration: C[m,n] = op(A) op(B),
// row-major, on the calling thread only (large products are split into
// column blocks over the thread pool by the caller).
//
// f32 goes through oneDNN's sgemm, f64 through OpenBLAS. oneDNN chooses its
// kernels from the CPU's feature flags (AVX2, AVX-512, ...); Debian's
// OpenBLAS 0.3.21 chooses from the CPU model number and, on a model newer
// than itself, falls back to its SSE3 kernels: on this project's Xeon
// (Sapphire Rapids family, AVX-512) that was 22 GFLOP/s per core against
// oneDNN's 90-125 (docs/results.md). f64 matmuls are for checking, not speed.
#pragma once

#include <cstdint>
#include <thread>

namespace tj {

// 0, or the library's nonzero status (only invalid arguments fail).
int gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc);
int gemm_f64(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
              int64_t ldb, double* c, int64_t ldc);

// oneDNN as Debian builds it runs its parallel regions on OpenMP (libgomp,
// loaded with it): left alone, a product or convolution called from a pool
// thread would start a team of its own, more threads than cores spinning at
// their barriers. The team size is a per-thread setting: one while this
// lives, put back after, since the calling thread may be the application's
// (a Python process whose torch reads the same setting as its thread count).
class OneOpenMpThread {
 public:
  OneOpenMpThread();
  ~OneOpenMpThread();
  OneOpenMpThread(const OneOpenMpThread&) = delete;
  OneOpenMpThread& operator=(const OneOpenMpThread&) = delete;

 private:
  struct Api {
    void (*set)(int) = nullptr;
    int (*get)() = nullptr;
  };
  static const Api& api();
  int was_ = 1;
};

// oneDNN generates its f32 kernels on the process's first product of any
// size: 40-55 ms on this project's Xeon, more than a warm start's whole
// compilation. A GemmWarmup made at the start of a compilation has a thread
// of its own make one small product meanwhile; its destructor waits for
// that thread, so none outlives the compilation (a thread still inside
// oneDNN while the process exits would meet its statics being destroyed).
// Only the first GemmWarmup of a process starts a thread.
class GemmWarmup {
 public:
  GemmWarmup();
  ~GemmWarmup();
  GemmWarmup(const GemmWarmup&) = delete;
  GemmWarmup& operator=(const GemmWarmup&) = delete;

 private:
  std::thread thread_;
};

// The f32 GEMM's library and the kernels it chose, for logs and reports
// ("oneDNN 2.6.3 (avx512_core)").
const char* gemm_f32_library();

}  // namespace tj
