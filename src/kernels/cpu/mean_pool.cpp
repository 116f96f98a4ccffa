#include "kernels/cpu/mean_pool.h"

#include "kernels/cpu/parallel.h"

namespace llmcc::cpu {
namespace {

// Memory-bound: below this many elements of x a thread team costs more than it saves.
constexpr std::int64_t kParallelMin = 32768;

}  // namespace

void mean_pool_forward(float* __restrict out, const float* __restrict x, std::int64_t B, std::int64_t T,
                       std::int64_t C) {
  const float inv_T = 1.0f / static_cast<float>(T);
  parallel_for(B, B * T * C >= kParallelMin, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      float* o = out + b * C;  // (C)
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) o[c] = 0.0f;
      for (std::int64_t t = 0; t < T; ++t) {
        const float* xt = x + (b * T + t) * C;  // (C)
#pragma omp simd
        for (std::int64_t c = 0; c < C; ++c) o[c] += xt[c];
      }
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) o[c] *= inv_T;
    }
  });
}

void mean_pool_backward(float* __restrict d_x, const float* __restrict d_out, std::int64_t B, std::int64_t T,
                        std::int64_t C, bool overwrite) {
  const float inv_T = 1.0f / static_cast<float>(T);
  parallel_for(B * T, B * T * C >= kParallelMin, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* g = d_out + (r / T) * C;  // (C)
      float* d = d_x + r * C;                // (C)
      if (overwrite) {
#pragma omp simd
        for (std::int64_t c = 0; c < C; ++c) d[c] = g[c] * inv_T;
      } else {
#pragma omp simd
        for (std::int64_t c = 0; c < C; ++c) d[c] += g[c] * inv_T;
      }
    }
  });
}

}  // namespace llmcc::cpu
