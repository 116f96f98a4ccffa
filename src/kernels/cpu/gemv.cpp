#include "kernels/cpu/gemv.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/parallel.h"

namespace llmcc::cpu {

namespace {

// Products below this many multiply-adds run on the calling thread (as the packed GEMM's
// threshold: waking a team costs more than such a product).
constexpr std::int64_t kParallelWork = 1 << 16;

constexpr int kRows = 4;

// Elements of a bf16 row widened at a time (gemv_rows_bf16): kRows rows of it take 8 KiB of L1.
constexpr int kWidenChunk = 512;
// bf16 values per 64-byte cache line.
constexpr int kLineBf16 = 32;

}  // namespace

void gemv_rows(int N, int K, float alpha, const float* x, const float* W, int ldw, float beta, float* y,
               const float* bias) {
  const auto store = [&](std::int64_t j, float dot) {
    const float old = beta == 0.0f ? 0.0f : beta * y[j];
    y[j] = alpha * dot + old + (bias != nullptr ? bias[j] : 0.0f);
  };
  // Rows go in groups of kRows (four dot products share each load of x, four independent sums)
  // and threads' ranges start at multiples of kRows, so a row's code path, and with it the order
  // of its sum, depends on its index alone: only the last N % kRows rows take the one-row loop,
  // whatever the thread count.
  parallel_for(
      N, static_cast<std::int64_t>(N) * K >= kParallelWork,
      [&](std::int64_t begin, std::int64_t end) {
        std::int64_t j = begin;
        for (; j + kRows <= end; j += kRows) {
          const float* w0 = W + j * ldw;  // (K) each
          const float* w1 = w0 + ldw;
          const float* w2 = w1 + ldw;
          const float* w3 = w2 + ldw;
          float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
          for (int p = 0; p < K; ++p) {
            s0 += x[p] * w0[p];
            s1 += x[p] * w1[p];
            s2 += x[p] * w2[p];
            s3 += x[p] * w3[p];
          }
          store(j, s0);
          store(j + 1, s1);
          store(j + 2, s2);
          store(j + 3, s3);
        }
        for (; j < end; ++j) {
          const float* w = W + j * ldw;  // (K)
          float s = 0.0f;
#pragma omp simd reduction(+ : s)
          for (int p = 0; p < K; ++p) s += x[p] * w[p];
          store(j, s);
        }
      },
      kRows);
}

void gemv_rows_bf16(int N, int K, const float* x, const std::uint16_t* W, int ldw, float* y, const float* bias) {
  // Each row is widened to fp32 a chunk at a time into buffers that stay in L1 (4 rows x 2 KiB),
  // then multiplied as gemv_rows does: both loops are plain element-wise ones the compiler
  // vectorises at any width, where widening inside the dot product's loop made GCC gather.
  const auto widen = [](const std::uint16_t* w, float* out, int n) { bf16_to_floats(w, out, n); };
  const auto finish = [&](std::int64_t j, float dot) { y[j] = dot + (bias != nullptr ? bias[j] : 0.0f); };
  // As gemv_rows: groups of kRows on ranges aligned to kRows, so a row's sum does not depend on
  // the thread count.
  parallel_for(
      N, static_cast<std::int64_t>(N) * K >= kParallelWork,
      [&](std::int64_t begin, std::int64_t end) {
        alignas(64) float b[kRows][kWidenChunk];
        std::int64_t j = begin;
        for (; j + kRows <= end; j += kRows) {
          float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
          for (int p0 = 0; p0 < K; p0 += kWidenChunk) {
            const int n = std::min(kWidenChunk, K - p0);
            // Request the same columns of the next group's rows while this group's are read:
            // each row is a short stream the hardware prefetchers follow too late.
            for (int r = 0; r < kRows; ++r)
              for (int p = 0; p < n; p += kLineBf16) __builtin_prefetch(W + (j + kRows + r) * ldw + p0 + p);
            for (int r = 0; r < kRows; ++r) widen(W + (j + r) * ldw + p0, b[r], n);
            const float* xp = x + p0;  // (n)
#pragma omp simd reduction(+ : s0, s1, s2, s3)
            for (int p = 0; p < n; ++p) {
              s0 += xp[p] * b[0][p];
              s1 += xp[p] * b[1][p];
              s2 += xp[p] * b[2][p];
              s3 += xp[p] * b[3][p];
            }
          }
          finish(j, s0);
          finish(j + 1, s1);
          finish(j + 2, s2);
          finish(j + 3, s3);
        }
        for (; j < end; ++j) {
          float s = 0.0f;
          for (int p0 = 0; p0 < K; p0 += kWidenChunk) {
            const int n = std::min(kWidenChunk, K - p0);
            widen(W + j * ldw + p0, b[0], n);
            const float* xp = x + p0;  // (n)
#pragma omp simd reduction(+ : s)
            for (int p = 0; p < n; ++p) s += xp[p] * b[0][p];
          }
          finish(j, s);
        }
      },
      kRows);
}

}  // namespace llmcc::cpu
