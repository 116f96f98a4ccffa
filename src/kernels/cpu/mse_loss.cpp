#include "kernels/cpu/mse_loss.h"

#include "kernels/cpu/ordered_sum.h"
#include "kernels/cpu/parallel.h"

namespace llmcc::cpu {
namespace {

// Memory-bound like add: below this a thread team costs more than it saves.
constexpr std::int64_t kParallelMin = 32768;

}  // namespace

float mse_loss_forward(const float* __restrict pred, const float* __restrict target, std::int64_t n) {
  // Squares summed in double: a float accumulator drifts by ~n * eps on large tensors.
  const double sum = parallel_ordered_sum<double>(n, n >= kParallelMin, [&](std::int64_t i) {
    const double e = static_cast<double>(pred[i]) - target[i];
    return e * e;
  });
  return static_cast<float>(sum / static_cast<double>(n));
}

// No __restrict on the adjoints: a caller may pass the same tensor for both (mse_loss(x, x));
// within each range d_pred is written before d_target is added to.
void mse_loss_backward(float* d_pred, float* d_target, const float* pred, const float* target, float d_out,
                       std::int64_t n, bool overwrite_pred, bool overwrite_target) {
  const float g = d_out * 2.0f / static_cast<float>(n);
  parallel_for(
      n, n >= kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
        if (d_pred) {
          if (overwrite_pred) {
#pragma omp simd
            for (std::int64_t i = begin; i < end; ++i) d_pred[i] = g * (pred[i] - target[i]);
          } else {
#pragma omp simd
            for (std::int64_t i = begin; i < end; ++i) d_pred[i] += g * (pred[i] - target[i]);
          }
        }
        if (d_target) {
          if (overwrite_target) {
#pragma omp simd
            for (std::int64_t i = begin; i < end; ++i) d_target[i] = -(g * (pred[i] - target[i]));
          } else {
#pragma omp simd
            for (std::int64_t i = begin; i < end; ++i) d_target[i] -= g * (pred[i] - target[i]);
          }
        }
      },
      kLineFloats);
}

float mse_loss_tangent_forward(const float* pred, const float* target, const float* tp, const float* tt,
                               std::int64_t n) {
  const double sum = parallel_ordered_sum<double>(n, n >= kParallelMin, [&](std::int64_t i) {
    return (static_cast<double>(pred[i]) - target[i]) * (static_cast<double>(tp[i]) - tt[i]);
  });
  return static_cast<float>(2.0 * sum / static_cast<double>(n));
}

// One loop per adjoint: any two of them may be the same tensor (each adds its own term).
void mse_loss_tangent_backward(float* d_pred, float* d_target, float* d_tp, float* d_tt, const float* pred,
                               const float* target, const float* tp, const float* tt, float d_out, std::int64_t n) {
  const float g = d_out * 2.0f / static_cast<float>(n);
  parallel_for(
      n, n >= kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
        if (d_pred) {
#pragma omp simd
          for (std::int64_t i = begin; i < end; ++i) d_pred[i] += g * (tp[i] - tt[i]);
        }
        if (d_target) {
#pragma omp simd
          for (std::int64_t i = begin; i < end; ++i) d_target[i] -= g * (tp[i] - tt[i]);
        }
        if (d_tp) {
#pragma omp simd
          for (std::int64_t i = begin; i < end; ++i) d_tp[i] += g * (pred[i] - target[i]);
        }
        if (d_tt) {
#pragma omp simd
          for (std::int64_t i = begin; i < end; ++i) d_tt[i] -= g * (pred[i] - target[i]);
        }
      },
      kLineFloats);
}

}  // namespace llmcc::cpu
