// A GEMM's operands with their transposes folded into strides. Element (r, c) of op(X) is
// X[r * row + c * col]: X stored as op(X) (trans false, leading dimension ld) has row = ld,
// col = 1; stored transposed, row = 1, col = ld. One of the two is always 1.
#pragma once

#include <cstddef>

namespace llmcc::cpu {

struct OperandStrides {
  std::ptrdiff_t row, col;
};

inline OperandStrides operand_strides(bool trans, int ld) {
  return trans ? OperandStrides{1, static_cast<std::ptrdiff_t>(ld)}
               : OperandStrides{static_cast<std::ptrdiff_t>(ld), 1};
}

// Row-major C(M, N) = alpha * op(A)(M, K) . op(B)(K, N) + beta * C (+ bias), with op(A)'s element
// (i, p) at A[i * a_row + p * a_col] and op(B)'s (p, j) at B[p * b_row + j * b_col]: the
// transposes folded into the strides.
struct GemmProblem {
  int M, N, K;
  float alpha, beta;
  const float* A;
  std::ptrdiff_t a_row, a_col;
  const float* B;
  std::ptrdiff_t b_row, b_col;
  float* C;
  std::ptrdiff_t ldc;
  const float* bias;  // N values added to every row of C, or null
};

inline GemmProblem gemm_problem(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                                const float* B, int ldb, float beta, float* C, int ldc, const float* bias) {
  const OperandStrides a = operand_strides(trans_a, lda), b = operand_strides(trans_b, ldb);
  return {M, N, K, alpha, beta, A, a.row, a.col, B, b.row, b.col, C, ldc, bias};
}

}  // namespace llmcc::cpu
