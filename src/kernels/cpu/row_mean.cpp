#include "kernels/cpu/row_mean.h"

#include "kernels/cpu/ordered_sum.h"
#include "kernels/cpu/parallel.h"

namespace llmcc::cpu {
namespace {

// Memory-bound: below this many elements of x a thread team costs more than it saves.
constexpr std::int64_t kParallelMin = 32768;

}  // namespace

void row_mean_forward(float* __restrict out, const float* __restrict x, std::int64_t R, std::int64_t C) {
  const float inv_c = 1.0f / static_cast<float>(C);
  parallel_for(R, R * C >= kParallelMin, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * C;  // (C)
      out[r] = ordered_sum(C, [&](std::int64_t c) { return xr[c]; }) * inv_c;
    }
  });
}

void row_mean_backward(float* __restrict d_x, const float* __restrict d_out, std::int64_t R, std::int64_t C,
                       bool overwrite) {
  const float inv_c = 1.0f / static_cast<float>(C);
  parallel_for(R, R * C >= kParallelMin, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float g = d_out[r] * inv_c;
      float* d = d_x + r * C;  // (C)
      if (overwrite) {
#pragma omp simd
        for (std::int64_t c = 0; c < C; ++c) d[c] = g;
      } else {
#pragma omp simd
        for (std::int64_t c = 0; c < C; ++c) d[c] += g;
      }
    }
  });
}

}  // namespace llmcc::cpu
