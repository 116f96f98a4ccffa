// The yardstick of the GEMM tests: C (M, N) = alpha * op(A) . op(B) + beta * C (+ bias) in
// double, with the storage conventions of cpu::gemm: A stored (K, M) when trans_a else (M, K);
// B stored (N, K) when trans_b else (K, N); lda/ldb/ldc row strides.
#pragma once

#include <cstddef>
#include <vector>

namespace llmcc::test {

// bias: N values added to every row, or null.
inline std::vector<double> naive_gemm(bool ta, bool tb, int M, int N, int K, double alpha, const std::vector<float>& A,
                                      int lda, const std::vector<float>& B, int ldb, double beta,
                                      const std::vector<float>& C, int ldc, const float* bias = nullptr) {
  std::vector<double> out(C.begin(), C.end());  // (M, ldc)
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int p = 0; p < K; ++p) {
        const double a = ta ? A[static_cast<std::size_t>(p) * lda + i] : A[static_cast<std::size_t>(i) * lda + p];
        const double b = tb ? B[static_cast<std::size_t>(j) * ldb + p] : B[static_cast<std::size_t>(p) * ldb + j];
        acc += a * b;
      }
      const std::size_t at = static_cast<std::size_t>(i) * ldc + j;
      out[at] = alpha * acc + beta * C[at] + (bias ? bias[j] : 0.0);
    }
  }
  return out;
}

}  // namespace llmcc::test
