#include "kernels/cpu/silu.h"

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/parallel.h"

namespace llmcc::cpu {

// Below this many elements a thread team costs more than it saves (an exp per element).
constexpr std::int64_t kParallelMin = 16384;

void silu_forward(float* __restrict out, const float* __restrict x, std::int64_t n) {
  parallel_for(
      n, n >= kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) out[i] = x[i] * fast_sigmoid(x[i]);
      },
      kLineFloats);
}

// silu' = s + x s (1 - s) with s = 1 / (1 + e), e = exp(-x). s (1 - s) is taken as e s s:
// 1 - s in float is all rounding once s ~ 1 (x > ~8), and x times it would show. Below
// x = -88, s is 0 (sigmoid_from_exp), and so is the product.
// No __restrict on d_x: the caller may pass d_out itself as d_x (same index, read then write).
void silu_backward(float* d_x, const float* x, const float* d_out, std::int64_t n) {
  if (!d_x) return;
  parallel_for(
      n, n >= kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) {
          const float e = fast_exp(-x[i]);
          const float s = sigmoid_from_exp(x[i], e);
          d_x[i] += d_out[i] * (s + x[i] * ((e * s) * s));
        }
      },
      kLineFloats);
}

}  // namespace llmcc::cpu
