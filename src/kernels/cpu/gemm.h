// The one GEMM interface every kernel uses; the library behind it is chosen by measurement
// (docs/perf.md, "GEMM: the choice of library"; bench/bench_gemm.cpp) and linked through
// cmake/Gemm.cmake.
#pragma once

namespace llmcc::cpu {

// Row-major C(M, N) = alpha * op(A) * op(B) + beta * C, where op(A) is (M, K) and op(B) is
// (K, N). trans_a: A is stored (K, M); trans_b: B is stored (N, K). lda/ldb/ldc are row strides
// of the stored matrices. Uses the thread count set by llmcc::set_num_threads. Always fp32: the
// bf16 products are gemm_packed_bf16's (linear.cpp chooses).
void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
          int ldb, float beta, float* C, int ldc);

// gemm, then C[i, j] += bias[j] for every row i (bias: N values). llmcc's own GEMM adds it in
// the micro-kernel's store of each tile's last K slice, so linear's forward makes no pass over
// its output for the bias; for the other libraries the bias is a pass over C after their call.
void gemm_bias(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
               int ldb, float beta, float* C, int ldc, const float* bias);

// Whether the library behind gemm allocates nothing once each thread has made its first call
// (true for llmcc's own packed GEMM only; dnnl_sgemm allocates its packing buffers per call).
// The steady-state allocation test holds a training step to zero allocations when it is.
bool gemm_is_allocation_free();

// Whether gemm is llmcc's own packed GEMM (gemm_packed.h), so that callers may use that GEMM's
// own entry points (a second product in the same pass) for products gemm would run.
bool gemm_is_packed();

// The fp32 kernel behind gemm, e.g. "avx512 14x32" or "onednn dnnl_sgemm".
const char* gemm_kernel_name();

}  // namespace llmcc::cpu
