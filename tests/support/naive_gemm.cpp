// The GEMM tests' reference (naive_gemm.h). op(A) and op(B)^T are first copied into contiguous
// (M, K) and (N, K) rows, and four columns are summed side by side (four independent chains): the
// GEMM tests evaluate this reference thousands of times, also in the sanitizer build, and a
// strided, one-chain loop made it most of their run time.
#include "naive_gemm.h"

namespace llmcc::test {

std::vector<double> naive_gemm(bool ta, bool tb, int M, int N, int K, double alpha, const std::vector<float>& A,
                               int lda, const std::vector<float>& B, int ldb, double beta, const std::vector<float>& C,
                               int ldc, const float* bias) {
  const auto k = static_cast<std::size_t>(K);
  std::vector<double> a(static_cast<std::size_t>(M) * k);  // (M, K): op(A)
  std::vector<double> b(static_cast<std::size_t>(N) * k);  // (N, K): op(B)^T
  for (int i = 0; i < M; ++i)
    for (int p = 0; p < K; ++p)
      a[i * k + p] = ta ? A[static_cast<std::size_t>(p) * lda + i] : A[static_cast<std::size_t>(i) * lda + p];
  for (int j = 0; j < N; ++j)
    for (int p = 0; p < K; ++p)
      b[j * k + p] = tb ? B[static_cast<std::size_t>(j) * ldb + p] : B[static_cast<std::size_t>(p) * ldb + j];
  std::vector<double> out(C.begin(), C.end());  // (M, ldc)
  const auto store = [&](int i, int j, double acc) {
    const std::size_t at = static_cast<std::size_t>(i) * ldc + j;
    out[at] = alpha * acc + beta * C[at] + (bias ? bias[j] : 0.0);
  };
  for (int i = 0; i < M; ++i) {
    const double* ai = a.data() + i * k;  // (K)
    int j = 0;
    for (; j + 4 <= N; j += 4) {
      const double *b0 = b.data() + j * k, *b1 = b0 + k, *b2 = b1 + k, *b3 = b2 + k;  // (K) each
      double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
      for (std::size_t p = 0; p < k; ++p) {
        s0 += ai[p] * b0[p];
        s1 += ai[p] * b1[p];
        s2 += ai[p] * b2[p];
        s3 += ai[p] * b3[p];
      }
      store(i, j, s0);
      store(i, j + 1, s1);
      store(i, j + 2, s2);
      store(i, j + 3, s3);
    }
    for (; j < N; ++j) {
      const double* bj = b.data() + j * k;  // (K)
      double s = 0.0;
      for (std::size_t p = 0; p < k; ++p) s += ai[p] * bj[p];
      store(i, j, s);
    }
  }
  return out;
}

}  // namespace llmcc::test
