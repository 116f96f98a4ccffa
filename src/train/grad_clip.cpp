#include "llmcc/train/grad_clip.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cpu/ordered_sum.h"
#include "kernels/cpu/parallel.h"  // use_team: no one-thread regions
#include "llmcc/error.h"
#include "llmcc/profile.h"

namespace llmcc {
namespace {

using cpu::use_team;

// How far ahead sum_of_squares requests lines: 2 KB, measured on an Intel Xeon (2 threads,
// docs/perf.md, "Optimizer and adjoints").
constexpr std::int64_t kSumAhead = 512;

}  // namespace

double grad_norm(const ParameterStore& grads) {
  LLMCC_PROFILE("grad_norm");
  return std::sqrt(sum_of_squares(grads.data(), grads.size()));
}

double sum_of_squares(const float* g, std::size_t size) {
  // The same sum whatever the thread count; it runs on every clipped training step, which
  // allocates nothing from the heap.
  // The gradients (498 MB for GPT-2 124M) stream from memory, and the hardware prefetchers alone
  // leave a core's read bandwidth partly idle: one line kSumAhead values ahead per kSumLanes.
  const auto n = static_cast<std::int64_t>(size);
  return cpu::parallel_ordered_sum<double>(
      n, true, [&](std::int64_t i) { return static_cast<double>(g[i]) * g[i]; },
      [&](std::int64_t i) {
        if (i + kSumAhead < n) __builtin_prefetch(g + i + kSumAhead);
      });
}

void scale_floats(float* g, std::size_t size, float factor) {
  const auto n = static_cast<std::int64_t>(size);
  if (use_team(n >= 32768)) {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < n; ++i) g[i] *= factor;
  } else {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) g[i] *= factor;
  }
}

void scale_grads(ParameterStore& grads, float factor) {
  LLMCC_PROFILE("scale_grads");
  scale_floats(grads.data(), grads.size(), factor);
}

float clip_factor(double norm, double max_norm) {
  if (!(max_norm > 0.0) || !std::isfinite(norm)) return 1.0f;
  const double coef = max_norm / (norm + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

double clip_grad_norm(ParameterStore& grads, double max_norm) {
  if (!(max_norm > 0.0)) {
    fail("grad_clip", "max_norm must be > 0, got " + std::to_string(max_norm));
  }
  const double norm = grad_norm(grads);
  const float factor = clip_factor(norm, max_norm);
  if (factor != 1.0f) scale_grads(grads, factor);
  return norm;
}

}  // namespace llmcc
