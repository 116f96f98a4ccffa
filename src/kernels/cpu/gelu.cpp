#include "kernels/cpu/gelu.h"

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/fast_math.h"

namespace llmcc::cpu {
namespace {

// Below this many elements a thread team costs more than it saves (an exp per element).
constexpr std::int64_t kParallelMin = 16384;
constexpr float kTwoScale = 2.0f * 0.7978845608f;  // 2 sqrt(2/pi): sigmoid(2u) = 0.5 (1 + tanh u)
constexpr float kCubic = 0.044715f;

}  // namespace

void gelu_forward(float* __restrict out, const float* __restrict x, std::int64_t n) {
  parallel_for(
      n, n >= kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) {
          const float v = x[i];
          out[i] = v * fast_sigmoid(kTwoScale * (v + kCubic * v * v * v));
        }
      },
      kLineFloats);
}

// With s = sigmoid(2u): 0.5 (1 - tanh(u)^2) = 2 s (1 - s), so gelu' = s + x s (1 - s) 2 du/dx.
// s (1 - s) is taken as e s s with e = exp(-2u): 1 - s in float is all rounding once s ~ 1
// (x > ~4), and x 2 du/dx (~35 at x = 5) would magnify it past 1e-6. Below 2u = -88, s is 0
// (sigmoid_from_exp), and so is the product.
// No __restrict on d_x: the caller may pass d_out itself as d_x (same index, read then write).
namespace {
template <bool kOverwrite>
void gelu_backward_impl(float* d_x, const float* x, const float* d_out, std::int64_t n) {
  parallel_for(
      n, n >= kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) {
          const float v = x[i];
          const float z = kTwoScale * (v + kCubic * v * v * v);
          const float e = fast_exp(-z);
          const float s = sigmoid_from_exp(z, e);
          const float two_du = kTwoScale * (1.0f + 3.0f * kCubic * v * v);
          const float g = d_out[i] * (s + v * ((e * s) * s) * two_du);
          if constexpr (kOverwrite) {
            d_x[i] = g;
          } else {
            d_x[i] += g;
          }
        }
      },
      kLineFloats);
}
}  // namespace

void gelu_backward(float* d_x, const float* x, const float* d_out, std::int64_t n, bool overwrite) {
  if (!d_x) return;
  if (overwrite) {
    gelu_backward_impl<true>(d_x, x, d_out, n);
  } else {
    gelu_backward_impl<false>(d_x, x, d_out, n);
  }
}

}  // namespace llmcc::cpu
