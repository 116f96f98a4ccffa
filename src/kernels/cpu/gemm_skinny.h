// GEMMs with a dimension of at most kSkinny (4): the inner one (a first layer over 2 input
// coordinates, an outer product), the output's columns (a last layer of one output, its weight
// gradient) or the output's rows. The packed GEMM pads such a product to whole 14 x 32 tiles and
// packs the large operands for a handful of products per element; these loops read each operand
// once instead, vectorised along whichever of the large dimensions is contiguous in memory
// (a small PINN's step spent about a quarter of its GEMM time in such products).
//
// Every element of C is summed by one thread in an order fixed by this code (K ascending, or a
// dot product's 16 lanes of ordered_sum.h), so the thread count changes no bit.
#pragma once

namespace llmcc::cpu {

inline constexpr int kSkinny = 4;

// gemm_packed_bias's contract (row-major C(M, N) = alpha * op(A) . op(B) + beta * C (+ bias),
// beta == 0 not reading C) for a product with min(M, N, K) <= kSkinny, K > 0 and alpha != 0;
// returns false, doing nothing, for any other.
bool gemm_skinny(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                 int ldb, float beta, float* C, int ldc, const float* bias);

}  // namespace llmcc::cpu
