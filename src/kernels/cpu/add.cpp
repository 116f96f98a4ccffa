#include "kernels/cpu/add.h"

namespace llmcc::cpu {

void add_forward(float* __restrict out, const float* __restrict a, const float* __restrict b,
                 std::int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > 32768)
  for (std::int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void add_backward(float* d_a, float* d_b, const float* __restrict d_out,
                  std::int64_t n) {
  if (d_a) {
#pragma omp parallel for simd schedule(static) if (n > 32768)
    for (std::int64_t i = 0; i < n; ++i) d_a[i] += d_out[i];
  }
  if (d_b) {
#pragma omp parallel for simd schedule(static) if (n > 32768)
    for (std::int64_t i = 0; i < n; ++i) d_b[i] += d_out[i];
  }
}

}  // namespace llmcc::cpu
