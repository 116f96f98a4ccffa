#include "kernels/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/ordered_sum.h"
#include "kernels/cpu/parallel.h"

namespace llmcc::cpu {
namespace {

// A row is V exps; below this many elements in all a thread team costs more than it saves.
constexpr std::int64_t kParallelElements = 16384;

// max over row[0 .. V). A select from -inf, not std::max from row[0]: GCC 12 leaves that form
// scalar (vmaxss), and vectorises this one (docs/perf.md, "Element-wise kernels"). A NaN logit
// may be dropped here, but it makes the exp-sums that follow NaN either way.
float row_max(const float* __restrict row, std::int64_t V) {
  float m = -std::numeric_limits<float>::infinity();
#if defined(__clang__)
  // Clang vectorises a max reduction only when NaNs are ruled out (-ffast-math); an `omp simd`
  // it cannot honour is a warning (-Wpass-failed), so it chooses for itself here.
  for (std::int64_t v = 0; v < V; ++v) m = m > row[v] ? m : row[v];
#else
#pragma omp simd reduction(max : m)
  for (std::int64_t v = 0; v < V; ++v) m = m > row[v] ? m : row[v];
#endif
  return m;
}

}  // namespace

double cross_entropy_forward(float* __restrict lse, std::int64_t* count, const float* __restrict logits,
                             const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t Vp,
                             std::int32_t ignore_index) {
  parallel_for(N, N * V >= kParallelElements, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t n = begin; n < end; ++n) {
      const float* row = logits + n * Vp;
      const float m = row_max(row, V);
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

namespace {

// A row's max over v < V, its exp-sum and the exp-weighted sum of t, in a fixed order.
struct RowSoftmax {
  float m, s, st;
};
RowSoftmax row_softmax(const float* __restrict row, const float* __restrict tr, std::int64_t V) {
  const float m = row_max(row, V);
  const auto [s, st] = ordered_sum2(V, [&](std::int64_t v) {
    const float e = fast_exp(row[v] - m);
    return std::pair{e, e * tr[v]};
  });
  return {m, s, st};
}

}  // namespace

double cross_entropy_tangent_forward(double* row_terms, const float* __restrict logits, const float* __restrict t,
                                     const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t Vp,
                                     std::int32_t ignore_index) {
  parallel_for(N, N * V >= kParallelElements, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t n = begin; n < end; ++n) {
      if (targets[n] == ignore_index) continue;
      const float* tr = t + n * Vp;
      const RowSoftmax r = row_softmax(logits + n * Vp, tr, V);
      row_terms[n] = static_cast<double>(r.st) / static_cast<double>(r.s) - static_cast<double>(tr[targets[n]]);
    }
  });
  double sum = 0.0;
  std::int64_t kept = 0;
  for (std::int64_t n = 0; n < N; ++n) {
    if (targets[n] == ignore_index) continue;
    sum += row_terms[n];
    ++kept;
  }
  return kept > 0 ? sum / static_cast<double>(kept) : 0.0;
}

void cross_entropy_tangent_backward(float* d_logits, float* d_t, const float* __restrict logits,
                                    const float* __restrict t, const std::int32_t* targets, float g, std::int64_t N,
                                    std::int64_t V, std::int64_t Vp, std::int32_t ignore_index, bool overwrite_logits,
                                    bool overwrite_t) {
  parallel_for(N, N * V >= kParallelElements, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t n = begin; n < end; ++n) {
      float* dl = d_logits ? d_logits + n * Vp : nullptr;
      float* dt = d_t ? d_t + n * Vp : nullptr;
      if (targets[n] == ignore_index) {
        if (dl && overwrite_logits) std::fill(dl, dl + Vp, 0.0f);
        if (dt && overwrite_t) std::fill(dt, dt + Vp, 0.0f);
        continue;
      }
      const float* row = logits + n * Vp;
      const float* tr = t + n * Vp;
      const RowSoftmax r = row_softmax(row, tr, V);
      const float inv_s = 1.0f / r.s, sn = r.st * inv_s;
      if (dl) {
        if (overwrite_logits) {
#pragma omp simd
          for (std::int64_t v = 0; v < V; ++v) dl[v] = g * fast_exp(row[v] - r.m) * inv_s * (tr[v] - sn);
          std::fill(dl + V, dl + Vp, 0.0f);
        } else {
#pragma omp simd
          for (std::int64_t v = 0; v < V; ++v) dl[v] += g * fast_exp(row[v] - r.m) * inv_s * (tr[v] - sn);
        }
      }
      if (dt) {
        if (overwrite_t) {
#pragma omp simd
          for (std::int64_t v = 0; v < V; ++v) dt[v] = g * fast_exp(row[v] - r.m) * inv_s;
          std::fill(dt + V, dt + Vp, 0.0f);
        } else {
#pragma omp simd
          for (std::int64_t v = 0; v < V; ++v) dt[v] += g * fast_exp(row[v] - r.m) * inv_s;
        }
        dt[targets[n]] -= g;
      }
    }
  });
}

}  // namespace llmcc::cpu
