#include "kernels/cpu/layernorm.h"

#include <cmath>
#include <cstddef>
#include <utility>

#include "kernels/cpu/ordered_sum.h"
#include "kernels/cpu/parallel.h"
#include "kernels/ref/layernorm.h"
#include "llmcc/arena.h"
#include "llmcc/error.h"

namespace llmcc::cpu {
namespace {

// Rows are cheap; below this many elements the thread start-up costs more than it saves.
constexpr std::int64_t kParallelElements = 16384;

}  // namespace

void layernorm_forward(float* __restrict out, float* __restrict mean, float* __restrict rstd, const float* __restrict x,
                       const float* __restrict w, const float* __restrict b, std::int64_t N, std::int64_t C) {
  const float eps = static_cast<float>(ref::kLayerNormEps);
  const float inv_c = 1.0f / static_cast<float>(C);
  parallel_for(N, N * C >= kParallelElements, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t n = begin; n < end; ++n) {
      const float* xr = x + n * C;
      float* yr = out + n * C;
      const float m = ordered_sum(C, [&](std::int64_t i) { return xr[i]; }) * inv_c;
      // Two passes: robust when |mean| >> std.
      const float var = ordered_sum(C, [&](std::int64_t i) { return (xr[i] - m) * (xr[i] - m); });
      const float s = 1.0f / std::sqrt(var * inv_c + eps);
#pragma omp simd
      for (std::int64_t i = 0; i < C; ++i) yr[i] = (xr[i] - m) * s * w[i] + b[i];
      if (mean) mean[n] = m;
      if (rstd) rstd[n] = s;
    }
  });
}

void layernorm_backward(float* d_x, float* d_w, float* d_b, const float* __restrict d_out, const float* __restrict x,
                        const float* __restrict w, const float* __restrict mean, const float* __restrict rstd,
                        std::int64_t N, std::int64_t C, bool overwrite_dx) {
  const bool params = d_w != nullptr || d_b != nullptr;
  const bool parallel = N * C >= kParallelElements;
  // Thread t owns partial[t * 2 * Cp .. ): its d_w sums, then its d_b sums.
  const std::int64_t Cp = (C + kLineFloats - 1) / kLineFloats * kLineFloats;
  const int max_threads = parallel ? omp_get_max_threads() : 1;
  float* partial = nullptr;
  if (params) {
    const auto bytes = static_cast<std::size_t>(max_threads) * 2 * Cp * sizeof(float);
    partial = static_cast<float*>(current_arena("layernorm").allocate(bytes, "layernorm d_w/d_b partials"));
  }
  const float inv_c = 1.0f / static_cast<float>(C);

  parallel_region(parallel, [&] {
    const int nt = omp_get_num_threads(), tid = omp_get_thread_num();
    LLMCC_ASSERT(nt <= max_threads, "more OpenMP threads than partial buffers");
    float* __restrict pw = params ? partial + static_cast<std::int64_t>(tid) * 2 * Cp : nullptr;
    float* __restrict pb = params ? pw + Cp : nullptr;
    if (params) {
      for (std::int64_t i = 0; i < 2 * Cp; ++i) pw[i] = 0.0f;
    }

    // Static schedule: for a fixed thread count each thread always gets the same rows.
#pragma omp for schedule(static)
    for (std::int64_t n = 0; n < N; ++n) {
      const float* xr = x + n * C;
      const float* dyr = d_out + n * C;
      const float m = mean[n], s = rstd[n];
      if (params) {
#pragma omp simd
        for (std::int64_t i = 0; i < C; ++i) {
          pw[i] += dyr[i] * ((xr[i] - m) * s);
          pb[i] += dyr[i];
        }
      }
      if (d_x == nullptr) continue;
      const auto [g_sum, gn_sum] = ordered_sum2(C, [&](std::int64_t i) {
        const float g = w[i] * dyr[i];
        return std::pair{g, g * ((xr[i] - m) * s)};
      });
      const float g_mean = g_sum * inv_c, gn_mean = gn_sum * inv_c;
      float* __restrict dxr = d_x + n * C;
      if (overwrite_dx) {
#pragma omp simd
        for (std::int64_t i = 0; i < C; ++i) {
          dxr[i] = s * (w[i] * dyr[i] - g_mean - ((xr[i] - m) * s) * gn_mean);
        }
      } else {
#pragma omp simd
        for (std::int64_t i = 0; i < C; ++i) {
          dxr[i] += s * (w[i] * dyr[i] - g_mean - ((xr[i] - m) * s) * gn_mean);
        }
      }
    }  // implicit barrier: all partials are complete

    if (params) {
      // Sum the partials in thread order, split over columns.
#pragma omp for schedule(static)
      for (std::int64_t i = 0; i < C; ++i) {
        float sw = 0.0f, sb = 0.0f;
        for (int t = 0; t < nt; ++t) {
          sw += partial[t * 2 * Cp + i];
          sb += partial[t * 2 * Cp + Cp + i];
        }
        if (d_w) d_w[i] += sw;
        if (d_b) d_b[i] += sb;  // after d_w: correct when they alias
      }
    }
  });
}

}  // namespace llmcc::cpu
