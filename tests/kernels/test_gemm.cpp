// cpu::gemm (whichever library cmake/Gemm.cmake chose) against a naive double loop: all four
// transpose combinations, awkward sizes on M, N and K, padded leading dimensions, alpha and
// beta, 1 and 2 threads. This is also the check to run with OPENBLAS_CORETYPE unset, since
// OpenBLAS's own CPU detection picks different kernels (docs/perf.md).
#include "kernels/cpu/gemm.h"

#include <array>

#include "test_support.h"

namespace llmcc {
namespace {

// C (M, N) = alpha * op(A) . op(B) + beta * C in double, with the storage conventions of
// cpu::gemm: A stored (K, M) when trans_a else (M, K); B stored (N, K) when trans_b else (K, N).
std::vector<double> naive_gemm(bool ta, bool tb, int M, int N, int K, double alpha,
                               const std::vector<float>& A, int lda, const std::vector<float>& B,
                               int ldb, double beta, const std::vector<float>& C, int ldc) {
  std::vector<double> out(C.begin(), C.end());
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int p = 0; p < K; ++p) {
        const double a = ta ? A[static_cast<std::size_t>(p) * lda + i] : A[static_cast<std::size_t>(i) * lda + p];
        const double b = tb ? B[static_cast<std::size_t>(j) * ldb + p] : B[static_cast<std::size_t>(p) * ldb + j];
        acc += a * b;
      }
      out[static_cast<std::size_t>(i) * ldc + j] = alpha * acc + beta * C[static_cast<std::size_t>(i) * ldc + j];
    }
  }
  return out;
}

// (M, N, K): each awkward size on each dim with small awkward others, and a few large ones
// where libraries switch to their blocked, multi-threaded paths.
std::vector<std::array<int, 3>> gemm_sizes() {
  std::vector<std::array<int, 3>> sizes;
  for (int s : test::awkward_sizes()) {
    sizes.push_back({s, 7, 65});
    sizes.push_back({65, s, 7});
    sizes.push_back({7, 65, s});
  }
  sizes.push_back({197, 65, 768});
  sizes.push_back({256, 768, 197});
  sizes.push_back({65, 1000, 768});
  return sizes;
}

void check_gemm(bool ta, bool tb, int M, int N, int K, int pad, float alpha, float beta) {
  // Stored shapes, each row padded by `pad` elements to test the leading dimensions.
  const int a_rows = ta ? K : M, a_cols = ta ? M : K;
  const int b_rows = tb ? N : K, b_cols = tb ? K : N;
  const int lda = a_cols + pad, ldb = b_cols + pad, ldc = N + pad;
  const auto A = test::random_vector<float>(static_cast<std::size_t>(a_rows) * lda, 1);  // (a_rows, lda)
  const auto B = test::random_vector<float>(static_cast<std::size_t>(b_rows) * ldb, 2);  // (b_rows, ldb)
  auto C = test::random_vector<float>(static_cast<std::size_t>(M) * ldc, 3);             // (M, ldc)
  const auto expect = naive_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  cpu::gemm(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
  // fp32 rounding grows with K; a wrong or missing term is off by ~0.1.
  EXPECT_TRUE(test::all_close("C", C, expect, 2e-6 * K + 1e-6, 1e-5));
}

TEST(GemmKernel, AllTransposesMatchNaiveLoop) {
  test::for_each_thread_count([](int) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (auto [M, N, K] : gemm_sizes()) {
          SCOPED_TRACE("trans_a=" + std::to_string(ta) + " trans_b=" + std::to_string(tb) +
                       " M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K));
          check_gemm(ta, tb, M, N, K, 0, 1.0f, 1.0f);
        }
      }
    }
  });
}

TEST(GemmKernel, LeadingDimensionsAlphaAndBeta) {
  test::for_each_thread_count([](int) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (float beta : {0.0f, 1.0f, -0.5f}) {
          SCOPED_TRACE("trans_a=" + std::to_string(ta) + " trans_b=" + std::to_string(tb) +
                       " beta=" + std::to_string(beta));
          check_gemm(ta, tb, 65, 197, 64, 3, 0.75f, beta);
          check_gemm(ta, tb, 3, 7, 1, 5, -2.0f, beta);
        }
      }
    }
  });
}

}  // namespace
}  // namespace llmcc
