// The yardstick of the GEMM tests: C (M, N) = alpha * op(A) . op(B) + beta * C (+ bias) in
// double, with the storage conventions of cpu::gemm: A stored (K, M) when trans_a else (M, K);
// B stored (N, K) when trans_b else (K, N); lda/ldb/ldc row strides.
#pragma once

#include <cstddef>
#include <vector>

namespace llmcc::test {

// bias: N values added to every row, or null. Every element's sum runs over p = 0..K-1 in order,
// in double. Defined in naive_gemm.cpp, which is compiled with the library's optimisation even
// where the test sources are not (Tests.cmake).
std::vector<double> naive_gemm(bool ta, bool tb, int M, int N, int K, double alpha, const std::vector<float>& A,
                               int lda, const std::vector<float>& B, int ldb, double beta, const std::vector<float>& C,
                               int ldc, const float* bias = nullptr);

}  // namespace llmcc::test
