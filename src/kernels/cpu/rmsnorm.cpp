#include "kernels/cpu/rmsnorm.h"

#include <cmath>
#include <cstddef>

#include "kernels/cpu/ordered_sum.h"
#include "kernels/cpu/parallel.h"
#include "llmcc/arena.h"
#include "llmcc/error.h"

namespace llmcc::cpu {
namespace {

// Rows are cheap; below this many elements the thread start-up costs more than it saves.
constexpr std::int64_t kParallelElements = 16384;

}  // namespace

void rmsnorm_forward(float* __restrict out, float* __restrict rstd, const float* __restrict x,
                     const float* __restrict w, float eps, std::int64_t N, std::int64_t C) {
  const float inv_c = 1.0f / static_cast<float>(C);
  parallel_for(N, N * C >= kParallelElements, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t n = begin; n < end; ++n) {
      const float* xr = x + n * C;
      float* yr = out + n * C;
      const float ss = ordered_sum(C, [&](std::int64_t i) { return xr[i] * xr[i]; });
      const float s = 1.0f / std::sqrt(ss * inv_c + eps);
#pragma omp simd
      for (std::int64_t i = 0; i < C; ++i) yr[i] = xr[i] * s * w[i];
      if (rstd) rstd[n] = s;
    }
  });
}

void rmsnorm_backward(float* d_x, float* d_w, const float* __restrict d_out, const float* __restrict x,
                      const float* __restrict w, const float* __restrict rstd, std::int64_t N, std::int64_t C) {
  const bool parallel = N * C >= kParallelElements;
  // Thread t owns partial[t * Cp .. t * Cp + C): its share of the d_w sums.
  const std::int64_t Cp = (C + kLineFloats - 1) / kLineFloats * kLineFloats;
  const int max_threads = parallel ? omp_get_max_threads() : 1;
  float* partial = nullptr;
  if (d_w) {
    const auto bytes = static_cast<std::size_t>(max_threads) * Cp * sizeof(float);
    partial = static_cast<float*>(current_arena("rmsnorm").allocate(bytes, "rmsnorm d_w partials"));
  }
  const float inv_c = 1.0f / static_cast<float>(C);

  parallel_region(parallel, [&] {
    const int nt = omp_get_num_threads(), tid = omp_get_thread_num();
    LLMCC_ASSERT(nt <= max_threads, "more OpenMP threads than partial buffers");
    float* __restrict pw = d_w ? partial + static_cast<std::int64_t>(tid) * Cp : nullptr;
    if (d_w) {
      for (std::int64_t i = 0; i < Cp; ++i) pw[i] = 0.0f;
    }

    // Static schedule: for a fixed thread count each thread always gets the same rows.
#pragma omp for schedule(static)
    for (std::int64_t n = 0; n < N; ++n) {
      const float* xr = x + n * C;
      const float* dyr = d_out + n * C;
      const float s = rstd[n];
      if (d_w) {
#pragma omp simd
        for (std::int64_t i = 0; i < C; ++i) pw[i] += dyr[i] * (xr[i] * s);
      }
      if (d_x == nullptr) continue;
      const float gn_sum = ordered_sum(C, [&](std::int64_t i) { return w[i] * dyr[i] * xr[i]; });
      const float k = s * s * s * gn_sum * inv_c;  // rstd * mean(g * norm) * rstd
      float* __restrict dxr = d_x + n * C;
#pragma omp simd
      for (std::int64_t i = 0; i < C; ++i) dxr[i] += s * w[i] * dyr[i] - xr[i] * k;
    }  // implicit barrier: all partials are complete

    if (d_w) {
      // Sum the partials in thread order, split over columns.
#pragma omp for schedule(static)
      for (std::int64_t i = 0; i < C; ++i) {
        float sw = 0.0f;
        for (int t = 0; t < nt; ++t) sw += partial[t * Cp + i];
        d_w[i] += sw;
      }
    }
  });
}

}  // namespace llmcc::cpu
