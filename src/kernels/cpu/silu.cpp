#include "kernels/cpu/silu.h"

namespace llmcc::cpu {

// Below this many elements a thread team costs more than it saves (an exp per element).
constexpr std::int64_t kParallelMin = 16384;

void silu_forward(float* __restrict out, const float* __restrict x, std::int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (std::int64_t i = 0; i < n; ++i) out[i] = x[i] * fast_sigmoid(x[i]);
}

// No __restrict on d_x: the caller may pass d_out itself as d_x (same index, read then write).
void silu_backward(float* d_x, const float* x, const float* d_out, std::int64_t n) {
  if (!d_x) return;
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (std::int64_t i = 0; i < n; ++i) {
    const float s = fast_sigmoid(x[i]);
    d_x[i] += d_out[i] * (s + x[i] * s * (1.0f - s));
  }
}

}  // namespace llmcc::cpu
