#include "kernels/cpu/tanh.h"

#include <cmath>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/parallel.h"

namespace llmcc::cpu {
namespace {

// Below this many elements a thread team costs more than it saves (an exp per element).
constexpr std::int64_t kParallelMin = 16384;

// tanh without a library call, so that the loops vectorise. Both branches are computed and one
// is selected (branch-free):
// - |x| >= 1/4: (1 - e) / (1 + e) with e = exp(-2|x|) <= 0.61, so 1 - e >= 0.39 has no
//   cancellation; the sign is copied from x. For |x| > 44, e underflows to fast_exp's clamp
//   and the quotient rounds to 1.
// - |x| < 1/4: the Taylor series to x^11 (x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835
//   - 1382x^11/155925); the first term left out is below 6e-11 relative there, and the
//   quotient above would lose up to 2^-23 / |x| relative to the cancellation in 1 - e.
inline float fast_tanh(float x) {
  const float a = std::fabs(x);
  const float e = fast_exp(-2.0f * a);
  const float q = std::copysign((1.0f - e) / (1.0f + e), x);
  const float z = x * x;
  float p = -1382.0f / 155925.0f;
  p = p * z + 62.0f / 2835.0f;
  p = p * z - 17.0f / 315.0f;
  p = p * z + 2.0f / 15.0f;
  p = p * z - 1.0f / 3.0f;
  const float s = x + x * z * p;
  return a < 0.25f ? s : q;
}

}  // namespace

void tanh_forward(float* __restrict out, const float* __restrict x, std::int64_t n) {
  parallel_for(
      n, n >= kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) out[i] = fast_tanh(x[i]);
      },
      kLineFloats);
}

// No __restrict on d_x: the caller may pass d_out itself as d_x (same index, read then write).
void tanh_backward(float* d_x, const float* x, const float* d_out, std::int64_t n) {
  if (!d_x) return;
  parallel_for(
      n, n >= kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) {
          const float y = fast_tanh(x[i]);
          d_x[i] += d_out[i] * (1.0f - y * y);
        }
      },
      kLineFloats);
}

}  // namespace llmcc::cpu
