#include "llmcc/train/grad_clip.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cpu/parallel.h"  // use_team: no one-thread regions
#include "llmcc/error.h"
#include "llmcc/profile.h"

namespace llmcc {
namespace {

using cpu::use_team;

constexpr std::int64_t kChunk = 1 << 14;  // floats per partial sum
// Chunks whose partial sums are held at once, on the stack (8 KiB): the norm runs on every
// clipped training step, which allocates nothing from the heap.
constexpr std::int64_t kBatch = 1024;

// Sum of squares of g[begin, end) in double.
double sum_squares(const float* g, std::int64_t begin, std::int64_t end) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t i = begin; i < end; ++i) s += static_cast<double>(g[i]) * g[i];
  return s;
}

}  // namespace

double grad_norm(const ParameterStore& grads) {
  LLMCC_PROFILE("grad_norm");
  return std::sqrt(sum_of_squares(grads.data(), grads.size()));
}

double sum_of_squares(const float* g, std::size_t size) {
  const auto n = static_cast<std::int64_t>(size);
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  // Partial sums of kBatch chunks at a time, added in chunk order: the same sum whatever the
  // thread count.
  double total = 0.0;
  double partial[kBatch];
  for (std::int64_t c0 = 0; c0 < chunks; c0 += kBatch) {
    const std::int64_t count = std::min(kBatch, chunks - c0);
    const auto chunk_sum = [&](std::int64_t c) {
      const std::int64_t begin = (c0 + c) * kChunk;
      partial[c] = sum_squares(g, begin, std::min(n, begin + kChunk));
    };
    if (use_team(count > 1)) {
#pragma omp parallel for schedule(static)
      for (std::int64_t c = 0; c < count; ++c) chunk_sum(c);
    } else {
      for (std::int64_t c = 0; c < count; ++c) chunk_sum(c);
    }
    for (std::int64_t c = 0; c < count; ++c) total += partial[c];
  }
  return total;
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
