#include "kernels/cpu/scale.h"

#include "kernels/cpu/ordered_sum.h"
#include "kernels/cpu/parallel.h"

namespace llmcc::cpu {
namespace {

// Memory-bound like add: below this a thread team costs more than it saves.
constexpr std::int64_t kParallelMin = 32768;

}  // namespace

void scale_forward(float* __restrict out, const float* __restrict x, float s, std::int64_t n) {
  parallel_for(
      n, n >= kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) out[i] = s * x[i];
      },
      kLineFloats);
}

// No __restrict on d_x: the caller may pass d_out itself as d_x (same index, read then write).
void scale_backward(float* d_x, float* d_s, const float* x, float s, const float* d_out, std::int64_t n) {
  if (d_x) {
    parallel_for(
        n, n >= kParallelMin,
        [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
          for (std::int64_t i = begin; i < end; ++i) d_x[i] += s * d_out[i];
        },
        kLineFloats);
  }
  if (d_s) {
    // Products are exact in double; summing in double keeps a 1e6-element sum at float
    // accuracy where a float accumulator would drift by ~n * eps.
    const double sum = parallel_ordered_sum<double>(
        n, n >= kParallelMin, [&](std::int64_t i) { return static_cast<double>(d_out[i]) * x[i]; });
    *d_s += static_cast<float>(sum);
  }
}

}  // namespace llmcc::cpu
