// llmcc's own single-precision GEMM: BLIS-style cache blocking with packed panels of A and B
// and a register-blocked FMA micro-kernel (gemm_microkernel.h). Its reason to exist: the
// packing buffers are allocated once per thread (on that thread's first call) and reused, so a
// steady-state training step makes no heap allocation, which dnnl_sgemm cannot do
// (docs/perf.md, "GEMM: the choice of library" and "Steady-state allocations"). cpu::gemm runs
// on it unless built with another -DLLMCC_GEMM (own is the default); it is always compiled, so
// tests and benchmarks can call it directly.
#pragma once

#include <cstdint>

#include "llmcc/runtime.h"  // GemmBlocking

namespace llmcc::cpu {

// The most rows of C a product in the streaming order may have (gemm_packed.cpp): the largest
// GemmBlocking::stream_rows, and the built-in one.
inline constexpr int kStreamMaxRows = 512;

// Same contract as cpu::gemm (gemm.h): row-major C(M, N) = alpha * op(A) . op(B) + beta * C,
// op(A) (M, K) stored (K, M) when trans_a, op(B) (K, N) stored (N, K) when trans_b, lda/ldb/ldc
// row strides of the stored matrices. beta == 0 overwrites C without reading it. Runs on
// omp_get_max_threads() threads (on the calling thread alone inside a parallel region or for
// small products). Valid arguments are the caller's duty (cpu::gemm's callers validate).
// A product with a dimension of at most 4 runs gemm_skinny.h's loops instead of the panels.
void gemm_packed(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                 int ldb, float beta, float* C, int ldc);

// The same, then C[i, j] += bias[j] for every row (bias: N values, or null), added by the
// micro-kernel that stores each tile's last K slice, so C is not passed over again.
void gemm_packed_bias(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                      const float* B, int ldb, float beta, float* C, int ldc, const float* bias);

// gemm_packed_bias with an explicit cache blocking (valid: validate_gemm_blocking) instead of
// the current one, on at most max_threads threads (0: the OpenMP thread count). For the
// autotuner and for tests of blockings nobody picked.
void gemm_packed_with(const GemmBlocking& blocking, int max_threads, bool trans_a, bool trans_b, int M, int N, int K,
                      float alpha, const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc,
                      const float* bias);

// The micro-kernel this build uses, e.g. "avx2 6x16" (for benchmark and test labels).
const char* gemm_packed_kernel_name();

// gemm_packed_bias on bf16 operands: op(A) and op(B) are rounded to bf16 as they are packed
// (bf16.h's rule), the products are summed in fp32, and alpha, beta and the bias apply in fp32.
// With AVX512_BF16 the micro-kernel is vdpbf16ps on panels of bf16 pairs; without it, the fp32
// micro-kernel on the rounded operands (the same products; sums in another order).
void gemm_packed_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                      const float* B, int ldb, float beta, float* C, int ldc, const float* bias);

// A second product summed into C by the same pass as the first: alpha op(A2)(M, K) . op(B2)(K, N),
// fp32 operands, A2 stored (M, K) with row stride lda, B2 stored (K, N), or (N, K) with trans_b,
// row stride ldb. Its K values come after the first product's, as one more slice of K, so C is
// read and written as often as for the first product alone (a rank-r update of a linear map's
// output, added by its base product). In the bf16 products' GEMM its operands are rounded to
// bf16 too. A K deeper than one slice of the first product's is added by a product of its own.
struct SecondProduct {
  int K = 0;  // 0: none
  float alpha = 1.0f;
  const float* A = nullptr;
  int lda = 0;
  bool trans_b = false;
  const float* B = nullptr;
  int ldb = 0;
};

// C = alpha op(A) op(B) + (second) + beta C (+ bias) on gemm_packed_bf16's panels
// (bf16_products) or gemm_packed_bias's fp32 ones. Any sizes, through the panels.
void gemm_packed_with_second(bool bf16_products, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                             const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc,
                             const float* bias, const SecondProduct& second);

// gemm_packed_bias with op(B) stored in bf16 (B: bf16.h's bits, strides as for floats), each
// value widened exactly as it is packed: the product of the floats the bits stand for, with no
// float copy of B. bf16_products: gemm_packed_bf16's panels and micro-kernel (op(A) rounded to
// bf16 as it is packed), else gemm_packed_bias's fp32 ones. Any sizes, through the panels (no
// one-row or skinny special cases). With a second product as gemm_packed_with_second.
void gemm_packed_b_bf16(bool bf16_products, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                        const float* A, int lda, const std::uint16_t* B, int ldb, float beta, float* C, int ldc,
                        const float* bias, const SecondProduct& second = {});

// The bf16 GEMM's path, e.g. "avx512_bf16 14x32 (vdpbf16ps)" (printed by train and bench).
const char* gemm_packed_bf16_kernel_name();

}  // namespace llmcc::cpu
