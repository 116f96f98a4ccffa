// cpu::gemm on the library chosen in cmake/Gemm.cmake (one of LLMCC_GEMM_OWN, LLMCC_GEMM_OPENBLAS,
// LLMCC_GEMM_BLIS, LLMCC_GEMM_ONEDNN). bench/ compiles this same file once per library, so the
// numbers in docs/perf.md measure exactly this wrapper.
#include "kernels/cpu/gemm.h"

#include <omp.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/parallel.h"

#if defined(LLMCC_GEMM_OWN)
#include "kernels/cpu/gemm_packed.h"
#elif defined(LLMCC_GEMM_OPENBLAS)
#include <cblas.h>
#elif defined(LLMCC_GEMM_BLIS)
#include <blis.h>
#elif defined(LLMCC_GEMM_ONEDNN)
#include <oneapi/dnnl/dnnl.h>

#include <cstdio>
#include <cstdlib>
#else
#error "no GEMM backend selected: define LLMCC_GEMM_OWN, LLMCC_GEMM_OPENBLAS, LLMCC_GEMM_BLIS or LLMCC_GEMM_ONEDNN"
#endif

namespace llmcc::cpu {

void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
          int ldb, float beta, float* C, int ldc) {
  if (K == 0) {
    // No product: C = beta * C (zeros when beta == 0), as BLAS defines it. Done here because
    // dnnl_sgemm 2.6.3 returns with C untouched when K == 0 (tests/kernels/test_gemm.cpp).
    for (int i = 0; i < M; ++i) {
      float* row = C + static_cast<std::ptrdiff_t>(i) * ldc;
      for (int j = 0; j < N; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    }
    return;
  }
#if defined(LLMCC_GEMM_OWN)
  // llmcc's packed GEMM (gemm_packed.cpp): packing buffers allocated once per thread.
  gemm_packed(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#elif defined(LLMCC_GEMM_OPENBLAS)
  // The OpenMP build of OpenBLAS follows omp_get_max_threads() on every call.
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha,
              A, lda, B, ldb, beta, C, ldc);
#elif defined(LLMCC_GEMM_BLIS)
  // BLIS ignores omp_set_num_threads (it reads BLIS_NUM_THREADS/OMP_NUM_THREADS once), so
  // the thread count set by llmcc::set_num_threads is passed per call. Row-major storage is
  // row stride ld, column stride 1; BLIS applies the transposes to the stored matrices.
  rntm_t rntm;
  bli_rntm_init(&rntm);
  bli_rntm_set_num_threads(omp_get_max_threads(), &rntm);
  bli_sgemm_ex(trans_a ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, trans_b ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, M, N, K,
               &alpha, const_cast<float*>(A), lda, 1, const_cast<float*>(B), ldb, 1, &beta, C, ldc, 1, nullptr, &rntm);
#elif defined(LLMCC_GEMM_ONEDNN)
  // dnnl_sgemm is row-major and uses omp_get_max_threads() threads (one inside a parallel
  // region; cpu::gemm's callers, the linear kernels, call it outside any). It allocates its
  // packing buffers on every call (about 1.3 MB in 3 allocations on 2 threads). oneDNN's matmul
  // primitive is no way out: cached per shape with a user scratchpad it still allocates 7 times
  // per call inside dnnl_primitive_execute (a std::unordered_map of the arguments), and oneDNN
  // 2.6.3's brgemm matmul is slower than dnnl_sgemm on the GPT-2 shapes (docs/perf.md,
  // "Steady-state allocations").
  const dnnl_status_t st =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (st != dnnl_success) {
    // Only invalid arguments fail, and the callers are kernels that pass valid ones.
    std::fprintf(stderr, "llmcc: dnnl_sgemm failed with status %d\n", static_cast<int>(st));
    std::abort();
  }
#endif
}

void gemm_bias(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
               int ldb, float beta, float* C, int ldc, const float* bias) {
#if defined(LLMCC_GEMM_OWN)
  gemm_packed_bias(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
#else
  gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  parallel_for(M, static_cast<std::int64_t>(M) * N >= 32768, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      float* row = C + i * ldc;
#pragma omp simd
      for (int j = 0; j < N; ++j) row[j] += bias[j];
    }
  });
#endif
}

const char* gemm_kernel_name() {
#if defined(LLMCC_GEMM_OWN)
  return gemm_packed_kernel_name();
#elif defined(LLMCC_GEMM_OPENBLAS)
  return "openblas sgemm";
#elif defined(LLMCC_GEMM_BLIS)
  return "blis sgemm";
#elif defined(LLMCC_GEMM_ONEDNN)
  return "onednn dnnl_sgemm";
#endif
}

bool gemm_is_allocation_free() {
#if defined(LLMCC_GEMM_OWN)
  return true;
#else
  return false;
#endif
}

bool gemm_is_packed() {
#if defined(LLMCC_GEMM_OWN)
  return true;
#else
  return false;
#endif
}

}  // namespace llmcc::cpu
