// Fast kernels for mse_loss (OpenMP over blocks, loops the compiler vectorises).
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// (1 / n) sum (pred - target)^2, summed in double.  (n)
float mse_loss_forward(const float* pred, const float* target, std::int64_t n);
// g = d_out * 2 / n;  d_pred += g (pred - target),  d_target -= g (pred - target)  (n), or =
// (and = -) for an adjoint whose overwrite flag is set; null adjoints are skipped.
void mse_loss_backward(float* d_pred, float* d_target, const float* pred, const float* target, float d_out,
                       std::int64_t n, bool overwrite_pred, bool overwrite_target);

// (2 / n) sum (pred - target) (tp - tt), summed in double.  (n)
float mse_loss_tangent_forward(const float* pred, const float* target, const float* tp, const float* tt,
                               std::int64_t n);
// g = d_out * 2 / n: d_pred += g (tp - tt), d_target -= the same, d_tp += g (pred - target), d_tt -=
// the same  (n); null adjoints are skipped.
void mse_loss_tangent_backward(float* d_pred, float* d_target, float* d_tp, float* d_tt, const float* pred,
                               const float* target, const float* tp, const float* tt, float d_out, std::int64_t n);

}  // namespace llmcc::cpu
