#include "llmcc/train/grad_clip.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "llmcc/error.h"
#include "llmcc/profile.h"

namespace llmcc {
namespace {
constexpr std::int64_t kChunk = 1 << 14;  // floats per partial sum
}

double grad_norm(const ParameterStore& grads) {
  LLMCC_PROFILE("grad_norm");
  const float* g = grads.data();
  const std::int64_t n = static_cast<std::int64_t>(grads.size());
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<std::size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (std::int64_t i = begin; i < end; ++i) s += static_cast<double>(g[i]) * g[i];
    partial[static_cast<std::size_t>(c)] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return std::sqrt(total);
}

void scale_grads(ParameterStore& grads, float factor) {
  LLMCC_PROFILE("scale_grads");
  float* g = grads.data();
  const std::int64_t n = static_cast<std::int64_t>(grads.size());
#pragma omp parallel for simd schedule(static) if (n >= 32768)
  for (std::int64_t i = 0; i < n; ++i) g[i] *= factor;
}

double clip_grad_norm(ParameterStore& grads, double max_norm) {
  if (!(max_norm > 0.0)) {
    fail("grad_clip", "max_norm must be > 0, got " + std::to_string(max_norm));
  }
  const double norm = grad_norm(grads);
  if (!std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) scale_grads(grads, static_cast<float>(coef));
  return norm;
}

}  // namespace llmcc
