#include "kernels/cpu/embedding.h"

#include <algorithm>

#include "kernels/cpu/parallel.h"

namespace llmcc::cpu {
namespace {

// A copy per element: below this many elements a thread team costs more than it saves.
constexpr std::int64_t kParallelElements = 16384;

}  // namespace

void embedding_forward(float* __restrict out, const std::int32_t* __restrict idx, const float* __restrict wte,
                       const float* __restrict wpe, std::int64_t B, std::int64_t T, std::int64_t C) {
  parallel_for(B * T, B * T * C >= kParallelElements, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t bt = begin; bt < end; ++bt) {
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
  });
}

// No __restrict between d_wte and d_wpe: they may be one tensor. The two scatter-adds run in
// separate parallel loops, so aliasing only changes which rows each touches, never a race.
void embedding_backward(float* d_wte, float* d_wpe, const float* __restrict d_out, const std::int32_t* __restrict idx,
                        std::int64_t B, std::int64_t T, std::int64_t C) {
  const bool parallel = use_team(B * T * C >= kParallelElements);
  if (d_wte) {
    // Repeated ids make rows of d_wte collide across positions, so threads split the channels
    // instead: the columns [c0, c1) of a range (rounded to cache lines) of every row, walking all
    // positions in order.
    parallel_for(
        C, parallel,
        [&](std::int64_t c0, std::int64_t c1) {
          for (std::int64_t bt = 0; bt < B * T; ++bt) {
            float* d = d_wte + static_cast<std::int64_t>(idx[bt]) * C;
            const float* g = d_out + bt * C;
#pragma omp simd
            for (std::int64_t c = c0; c < c1; ++c) d[c] += g[c];
          }
        },
        kLineFloats);
  }
  if (d_wpe) {
    // Each position's row is owned by one thread; the batch is summed in b order.
    parallel_for(T, parallel && T > 1, [&](std::int64_t t0, std::int64_t t1) {
      for (std::int64_t t = t0; t < t1; ++t) {
        float* d = d_wpe + t * C;
        for (std::int64_t b = 0; b < B; ++b) {
          const float* g = d_out + (b * T + t) * C;
#pragma omp simd
          for (std::int64_t c = 0; c < C; ++c) d[c] += g[c];
        }
      }
    });
  }
}

}  // namespace llmcc::cpu
