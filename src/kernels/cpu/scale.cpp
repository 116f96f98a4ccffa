#include "kernels/cpu/scale.h"

namespace llmcc::cpu {
namespace {

// Memory-bound like add: below this a thread team costs more than it saves.
constexpr std::int64_t kParallelMin = 32768;

}  // namespace

void scale_forward(float* __restrict out, const float* __restrict x, float s, std::int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (std::int64_t i = 0; i < n; ++i) out[i] = s * x[i];
}

// No __restrict on d_x: the caller may pass d_out itself as d_x (same index, read then write).
void scale_backward(float* d_x, float* d_s, const float* x, float s, const float* d_out,
                    std::int64_t n) {
  if (d_x) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
    for (std::int64_t i = 0; i < n; ++i) d_x[i] += s * d_out[i];
  }
  if (d_s) {
    // Products are exact in double; summing in double keeps a 1e6-element sum at float
    // accuracy where a float accumulator would drift by ~n * eps.
    double sum = 0.0;
#pragma omp parallel for simd schedule(static) reduction(+ : sum) if (n >= kParallelMin)
    for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(d_out[i]) * x[i];
    *d_s += static_cast<float>(sum);
  }
}

}  // namespace llmcc::cpu
