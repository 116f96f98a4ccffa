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

// The tangents are memory-bound: one pass over their operands each (the chain of mul and rsub
// they replace takes three to seven). Adjoints may alias d_out (same index, read then write), so
// nothing here is __restrict but the forward's output.
void tanh_tangent_forward(float* __restrict out, const float* y, const float* t, std::int64_t n) {
  parallel_for(
      n, n >= kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) out[i] = t[i] * (1.0f - y[i] * y[i]);
      },
      kLineFloats);
}

void tanh_tangent_backward(float* d_y, float* d_t, const float* y, const float* t, const float* d_out, std::int64_t n) {
  parallel_for(
      n, n >= kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
        if (d_y != nullptr && d_t != nullptr) {
#pragma omp simd
          for (std::int64_t i = begin; i < end; ++i) {
            const float g = d_out[i];
            d_y[i] += -2.0f * y[i] * t[i] * g;
            d_t[i] += (1.0f - y[i] * y[i]) * g;
          }
        } else if (d_y != nullptr) {
#pragma omp simd
          for (std::int64_t i = begin; i < end; ++i) d_y[i] += -2.0f * y[i] * t[i] * d_out[i];
        } else if (d_t != nullptr) {
#pragma omp simd
          for (std::int64_t i = begin; i < end; ++i) d_t[i] += (1.0f - y[i] * y[i]) * d_out[i];
        }
      },
      kLineFloats);
}

void tanh_tangent2_forward(float* __restrict out, const float* y, const float* t, const float* ty, const float* tt,
                           std::int64_t n) {
  parallel_for(
      n, n >= kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) out[i] = tt[i] * (1.0f - y[i] * y[i]) - 2.0f * y[i] * ty[i] * t[i];
      },
      kLineFloats);
}

void tanh_tangent2_backward(float* d_y, float* d_t, float* d_ty, float* d_tt, const float* y, const float* t,
                            const float* ty, const float* tt, const float* d_out, std::int64_t n) {
  parallel_for(
      n, n >= kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
        if (d_y != nullptr && d_t != nullptr && d_ty != nullptr && d_tt != nullptr) {
      // The usual case (every operand carries a derivative): one pass over the operands.
#pragma omp simd
          for (std::int64_t i = begin; i < end; ++i) {
            const float g = d_out[i], yy = y[i], a = t[i], b = ty[i];
            d_y[i] += -2.0f * (yy * tt[i] + b * a) * g;
            d_t[i] += -2.0f * yy * b * g;
            d_ty[i] += -2.0f * yy * a * g;
            d_tt[i] += (1.0f - yy * yy) * g;
          }
          return;
        }
        // Otherwise one loop per adjoint keeps each vectorised without a branch inside.
        if (d_y != nullptr) {
#pragma omp simd
          for (std::int64_t i = begin; i < end; ++i) d_y[i] += -2.0f * (y[i] * tt[i] + ty[i] * t[i]) * d_out[i];
        }
        if (d_t != nullptr) {
#pragma omp simd
          for (std::int64_t i = begin; i < end; ++i) d_t[i] += -2.0f * y[i] * ty[i] * d_out[i];
        }
        if (d_ty != nullptr) {
#pragma omp simd
          for (std::int64_t i = begin; i < end; ++i) d_ty[i] += -2.0f * y[i] * t[i] * d_out[i];
        }
        if (d_tt != nullptr) {
#pragma omp simd
          for (std::int64_t i = begin; i < end; ++i) d_tt[i] += (1.0f - y[i] * y[i]) * d_out[i];
        }
      },
      kLineFloats);
}

}  // namespace llmcc::cpu
