#include "kernels/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/ordered_sum.h"
#include "kernels/cpu/parallel.h"

namespace llmcc::cpu {
namespace {

// A row is V exps; below this many elements in all a thread team costs more than it saves.
constexpr std::int64_t kParallelElements = 16384;

}  // namespace

double cross_entropy_forward(float* __restrict lse, std::int64_t* count, const float* __restrict logits,
                             const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t Vp,
                             std::int32_t ignore_index) {
  parallel_for(N, N * V >= kParallelElements, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t n = begin; n < end; ++n) {
      const float* row = logits + n * Vp;
      // A select from -inf, not std::max from row[0]: GCC 12 leaves that form scalar (vmaxss),
      // and vectorises this one (docs/perf.md, "Element-wise kernels"). A NaN logit may be
      // dropped here, but it makes the sum below NaN either way.
      float m = -std::numeric_limits<float>::infinity();
#if defined(__clang__)
      // Clang vectorises a max reduction only when NaNs are ruled out (-ffast-math); an
      // `omp simd` it cannot honour is a warning (-Wpass-failed), so it chooses for itself here.
      for (std::int64_t v = 0; v < V; ++v) m = m > row[v] ? m : row[v];
#else
#pragma omp simd reduction(max : m)
      for (std::int64_t v = 0; v < V; ++v) m = m > row[v] ? m : row[v];
#endif
      // x - m <= 0, so fast_exp's clamp at -87 only turns terms below 1.6e-38 into 1.6e-38,
      // invisible next to the max term's 1.
      const float s = ordered_sum(V, [&](std::int64_t v) { return fast_exp(row[v] - m); });
      lse[n] = m + std::log(s);
    }
  });
  // Serial, in row order, in double: N terms are cheap and the sum is then deterministic.
  double loss = 0.0;
  std::int64_t kept = 0;
  for (std::int64_t n = 0; n < N; ++n) {
    if (targets[n] == ignore_index) continue;
    loss += static_cast<double>(lse[n]) - static_cast<double>(logits[n * Vp + targets[n]]);
    ++kept;
  }
  *count = kept;
  return kept > 0 ? loss / static_cast<double>(kept) : 0.0;
}

void cross_entropy_backward(float* __restrict d_logits, const float* __restrict logits, const float* __restrict lse,
                            const std::int32_t* targets, float scale, std::int64_t N, std::int64_t V, std::int64_t Vp,
                            std::int32_t ignore_index, bool overwrite) {
  parallel_for(N, N * V >= kParallelElements, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t n = begin; n < end; ++n) {
      float* d = d_logits + n * Vp;
      if (targets[n] == ignore_index) {
        if (overwrite) std::fill(d, d + Vp, 0.0f);
        continue;
      }
      const float* row = logits + n * Vp;
      const float l = lse[n];
      if (overwrite) {
#pragma omp simd
        for (std::int64_t v = 0; v < V; ++v) d[v] = scale * fast_exp(row[v] - l);
        std::fill(d + V, d + Vp, 0.0f);
      } else {
#pragma omp simd
        for (std::int64_t v = 0; v < V; ++v) d[v] += scale * fast_exp(row[v] - l);
      }
      d[targets[n]] -= scale;
    }
  });
}

}  // namespace llmcc::cpu
