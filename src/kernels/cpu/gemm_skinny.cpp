#include "kernels/cpu/gemm_skinny.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/gemm_strides.h"
#include "kernels/cpu/ordered_sum.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/thread_buffer.h"

namespace llmcc::cpu {
namespace {

using std::int64_t;
using std::ptrdiff_t;

// Below this many multiply-adds the calling thread does the product alone.
constexpr int64_t kParallelMin = 1 << 16;

// Rows (or columns) of C whose sums one thread keeps in a block on its stack in the forms that
// run along a large dimension of C: kSkinny x kBlock floats (4 KB).
constexpr int kBlock = 256;

// The small operand gathered into contiguous rows, on the calling thread (the team only reads it).
struct GatherTag;

// C(i, j) = alpha * s + beta * C(i, j) (+ bias(j)); beta == 0 does not read C.
inline float finish(float s, float alpha, float beta, const float* c, const float* bias, int j) {
  float v = alpha * s;
  if (beta != 0.0f) v += beta * *c;
  if (bias) v += bias[j];
  return v;
}

// c[0 .. n) = alpha * acc + beta * c (+ bias), one vectorised loop per case.
void store_row(float* __restrict c, const float* __restrict acc, int n, float alpha, float beta,
               const float* __restrict bias) {
  if (beta == 0.0f && !bias) {
#pragma omp simd
    for (int j = 0; j < n; ++j) c[j] = alpha * acc[j];
  } else if (beta == 0.0f) {
#pragma omp simd
    for (int j = 0; j < n; ++j) c[j] = alpha * acc[j] + bias[j];
  } else if (!bias) {
#pragma omp simd
    for (int j = 0; j < n; ++j) c[j] = alpha * acc[j] + beta * c[j];
  } else {
#pragma omp simd
    for (int j = 0; j < n; ++j) c[j] = alpha * acc[j] + beta * c[j] + bias[j];
  }
}

// The product (gemm_strides.h), and whether it is worth a team.
struct Skinny : GemmProblem {
  bool worth() const { return static_cast<int64_t>(M) * N * K >= kParallelMin; }
};

// K <= kSkinny: bp (K, N) = op(B) gathered; each row of C, kBlock columns at a time, sums its K
// products in p order, vectorised along the columns. The team splits C's rows.
void small_k(const Skinny& g) {
  const int M = g.M, N = g.N, K = g.K;
  float* bp = thread_buffer<GatherTag>(static_cast<std::size_t>(K) * N, "gemm", "for a skinny product's operand");
  for (int p = 0; p < K; ++p)
    for (int j = 0; j < N; ++j) bp[static_cast<ptrdiff_t>(p) * N + j] = g.B[p * g.b_row + j * g.b_col];
  parallel_for(M, g.worth(), [&](int64_t begin, int64_t end) {
    float acc[kBlock];
    for (int64_t i = begin; i < end; ++i) {
      const float* a = g.A + i * g.a_row;
      float* c = g.C + i * g.ldc;
      for (int j0 = 0; j0 < N; j0 += kBlock) {
        const int cols = std::min(kBlock, N - j0);
        const float a0 = a[0];
#pragma omp simd
        for (int jj = 0; jj < cols; ++jj) acc[jj] = a0 * bp[j0 + jj];
        for (int p = 1; p < K; ++p) {
          const float ap = a[p * g.a_col];
          const float* b = bp + static_cast<ptrdiff_t>(p) * N + j0;
#pragma omp simd
          for (int jj = 0; jj < cols; ++jj) acc[jj] += ap * b[jj];
        }
        store_row(c + j0, acc, cols, g.alpha, g.beta, g.bias ? g.bias + j0 : nullptr);
      }
    }
  });
}

// N <= kSkinny: bt (N, K) = op(B)^T gathered. With op(A)'s rows contiguous, each element is a
// dot product along K (ordered_sum's 16 lanes); with its columns contiguous (A stored (K, M)),
// blocks of kBlock rows of C sum in p order, vectorised along the rows. The team splits C's rows.
void small_n(const Skinny& g) {
  const int M = g.M, N = g.N, K = g.K;
  float* bt = thread_buffer<GatherTag>(static_cast<std::size_t>(N) * K, "gemm", "for a skinny product's operand");
  for (int j = 0; j < N; ++j)
    for (int p = 0; p < K; ++p) bt[static_cast<ptrdiff_t>(j) * K + p] = g.B[p * g.b_row + j * g.b_col];
  if (g.a_col == 1) {
    parallel_for(M, g.worth(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* a = g.A + i * g.a_row;
        float* c = g.C + i * g.ldc;
        for (int j = 0; j < N; ++j) {
          const float* b = bt + static_cast<ptrdiff_t>(j) * K;
          const float s = ordered_sum<float>(K, [&](int64_t p) { return a[p] * b[p]; });
          c[j] = finish(s, g.alpha, g.beta, c + j, g.bias, j);
        }
      }
    });
    return;
  }
  const int64_t blocks = (M + kBlock - 1) / kBlock;
  parallel_for(blocks, g.worth(), [&](int64_t begin, int64_t end) {
    for (int64_t blk = begin; blk < end; ++blk) {
      const int i0 = static_cast<int>(blk * kBlock), rows = std::min(kBlock, M - i0);
      float acc[kSkinny][kBlock] = {};
      for (int p = 0; p < K; ++p) {
        const float* a = g.A + p * g.a_col + i0;  // op(A)(i0 .., p), contiguous
        for (int j = 0; j < N; ++j) {
          const float b = bt[static_cast<ptrdiff_t>(j) * K + p];
#pragma omp simd
          for (int ii = 0; ii < rows; ++ii) acc[j][ii] += a[ii] * b;
        }
      }
      for (int ii = 0; ii < rows; ++ii) {
        float* c = g.C + (i0 + ii) * g.ldc;
        for (int j = 0; j < N; ++j) c[j] = finish(acc[j][ii], g.alpha, g.beta, c + j, g.bias, j);
      }
    }
  });
}

// M <= kSkinny: at (M, K) = op(A) gathered. With op(B)'s columns contiguous along K (B stored
// (N, K)), each element is a dot product along K; with its rows contiguous, blocks of kBlock
// columns of C sum in p order, vectorised along the columns. The team splits C's columns.
void small_m(const Skinny& g) {
  const int M = g.M, N = g.N, K = g.K;
  float* at = thread_buffer<GatherTag>(static_cast<std::size_t>(M) * K, "gemm", "for a skinny product's operand");
  for (int i = 0; i < M; ++i)
    for (int p = 0; p < K; ++p) at[static_cast<ptrdiff_t>(i) * K + p] = g.A[i * g.a_row + p * g.a_col];
  if (g.b_row == 1) {
    parallel_for(N, g.worth(), [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        const float* b = g.B + j * g.b_col;
        for (int i = 0; i < M; ++i) {
          const float* a = at + static_cast<ptrdiff_t>(i) * K;
          const float s = ordered_sum<float>(K, [&](int64_t p) { return a[p] * b[p]; });
          float* c = g.C + i * g.ldc + j;
          *c = finish(s, g.alpha, g.beta, c, g.bias, static_cast<int>(j));
        }
      }
    });
    return;
  }
  const int64_t blocks = (N + kBlock - 1) / kBlock;
  parallel_for(blocks, g.worth(), [&](int64_t begin, int64_t end) {
    for (int64_t blk = begin; blk < end; ++blk) {
      const int j0 = static_cast<int>(blk * kBlock), cols = std::min(kBlock, N - j0);
      float acc[kSkinny][kBlock] = {};
      for (int p = 0; p < K; ++p) {
        const float* b = g.B + p * g.b_row + j0;  // op(B)(p, j0 ..), contiguous
        for (int i = 0; i < M; ++i) {
          const float a = at[static_cast<ptrdiff_t>(i) * K + p];
#pragma omp simd
          for (int jj = 0; jj < cols; ++jj) acc[i][jj] += a * b[jj];
        }
      }
      for (int i = 0; i < M; ++i)
        store_row(g.C + i * g.ldc + j0, acc[i], cols, g.alpha, g.beta, g.bias ? g.bias + j0 : nullptr);
    }
  });
}

}  // namespace

bool gemm_skinny(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                 int ldb, float beta, float* C, int ldc, const float* bias) {
  if (M <= 0 || N <= 0 || K <= 0 || alpha == 0.0f || std::min({M, N, K}) > kSkinny) return false;
  const Skinny g{gemm_problem(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias)};
  if (K <= kSkinny) {
    small_k(g);
  } else if (N <= kSkinny) {
    small_n(g);
  } else {
    small_m(g);
  }
  return true;
}

}  // namespace llmcc::cpu
