// The bf16 GEMM on AMX tiles (Intel Xeon from Sapphire Rapids on): the same product as
// gemm_packed_bf16 (gemm_packed.h), C = alpha * op(A) . op(B) + beta * C (+ bias per column),
// op(A) and op(B) rounded to bf16 by bf16.h's rule, each product exact and the products summed
// in fp32, on the tile unit's tdpbf16ps instead of vdpbf16ps on vectors.
//
// Built only for a CPU with AMX-BF16 (-march=native on one); usable only once Linux has granted
// the process the tile registers' state, which amx_bf16_usable() asks for on its first call.
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// Whether gemm_amx_bf16 can run here: built with AMX-BF16 and the tile state granted. The first
// call asks Linux for it (arch_prctl ARCH_REQ_XCOMP_PERM); later calls return the answer.
bool amx_bf16_usable();

// As gemm_packed_bf16; only where amx_bf16_usable(). Each element of C sums K in the same order
// whatever the thread count, so results do not change with it.
void gemm_amx_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                   const float* B, int ldb, float beta, float* C, int ldc, const float* bias);

// The AMX peak's loop (fma_peak.cpp): `iters` rounds of four independent tdpbf16ps on tiles
// held in the registers, kAmxFlopsPerIter flops each round; returns a sum of the results so the
// work cannot be dropped. Only where amx_bf16_usable().
inline constexpr double kAmxFlopsPerIter = 4 * 2.0 * 16 * 16 * 32;
float amx_bf16_dot_loop(std::int64_t iters, float seed);

// Whether gemm_bf16 runs this product on AMX tiles: usable here and the product fills them (M and
// N at least 16, K at least 32).
bool gemm_bf16_uses_amx(int M, int N, int K);

// The bf16 GEMM llmcc runs (linear.cpp): AMX where gemm_bf16_uses_amx, else gemm_packed_bf16.
void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
               int ldb, float beta, float* C, int ldc, const float* bias);

// The kernel gemm_bf16 runs on large products, e.g. "amx_bf16 32x32 (tdpbf16ps)" (printed by
// train and bench).
const char* gemm_bf16_kernel_name();

}  // namespace llmcc::cpu
