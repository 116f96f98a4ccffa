#include "kernels/cpu/embedding.h"

#include <omp.h>

#include <algorithm>

namespace llmcc::cpu {
namespace {

// A copy per element: below this many elements a thread team costs more than it saves.
constexpr std::int64_t kParallelElements = 16384;
// Channel blocks start on a cache-line boundary (16 floats) so threads never share a line.
constexpr std::int64_t kLineFloats = 16;

}  // namespace

void embedding_forward(float* __restrict out, const std::int32_t* __restrict idx,
                       const float* __restrict wte, const float* __restrict wpe, std::int64_t B,
                       std::int64_t T, std::int64_t C) {
#pragma omp parallel for schedule(static) if (B * T * C >= kParallelElements)
  for (std::int64_t bt = 0; bt < B * T; ++bt) {
    const float* e = wte + static_cast<std::int64_t>(idx[bt]) * C;
    float* o = out + bt * C;
    if (wpe) {
      const float* p = wpe + (bt % T) * C;
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) o[c] = e[c] + p[c];
    } else {
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) o[c] = e[c];
    }
  }
}

// No __restrict between d_wte and d_wpe: they may be one tensor. The two scatter-adds run in
// separate parallel loops, so aliasing only changes which rows each touches, never a race.
void embedding_backward(float* d_wte, float* d_wpe, const float* __restrict d_out,
                        const std::int32_t* __restrict idx, std::int64_t B, std::int64_t T,
                        std::int64_t C) {
  const bool parallel = B * T * C >= kParallelElements;
  if (d_wte) {
    // Repeated ids make rows of d_wte collide across positions, so threads split the channels
    // instead: thread k owns columns [k * W, (k + 1) * W) of every row and walks all positions
    // in order. W is rounded to a cache line.
    const int threads = parallel ? omp_get_max_threads() : 1;
    const std::int64_t per = (C + threads - 1) / threads;
    const std::int64_t W = (per + kLineFloats - 1) / kLineFloats * kLineFloats;
    const std::int64_t blocks = (C + W - 1) / W;
#pragma omp parallel for schedule(static, 1) if (parallel && blocks > 1)
    for (std::int64_t k = 0; k < blocks; ++k) {
      const std::int64_t c0 = k * W, c1 = std::min(C, c0 + W);
      for (std::int64_t bt = 0; bt < B * T; ++bt) {
        float* d = d_wte + static_cast<std::int64_t>(idx[bt]) * C;
        const float* g = d_out + bt * C;
#pragma omp simd
        for (std::int64_t c = c0; c < c1; ++c) d[c] += g[c];
      }
    }
  }
  if (d_wpe) {
    // Each position's row is owned by one thread; the batch is summed in b order.
#pragma omp parallel for schedule(static) if (parallel && T > 1)
    for (std::int64_t t = 0; t < T; ++t) {
      float* d = d_wpe + t * C;
      for (std::int64_t b = 0; b < B; ++b) {
        const float* g = d_out + (b * T + t) * C;
#pragma omp simd
        for (std::int64_t c = 0; c < C; ++c) d[c] += g[c];
      }
    }
  }
}

}  // namespace llmcc::cpu
