// mse_loss: mean squared error between a prediction and a target of the same shape (regression,
// fitting trajectories), as PyTorch's F.mse_loss with reduction "mean"; and its tangent, for
// adgen's forward mode.
#pragma once

#include "llmcc/tensor.h"

namespace llmcc {

// loss = (1 / N) sum_i (pred[i] - target[i])^2 over all N elements, summed in double.
// pred, target: any shape, the same for both.
float mse_loss(const Tensor& pred, const Tensor& target);

// With g = d_out * 2 / N:  d_pred += g (pred - target),  d_target -= g (pred - target).
// d_pred, d_target: the shape of pred, each may be null (skipped). `out` is not read.
void mse_loss_pullback(const Tensor& pred, const Tensor& target, float out, float d_out, Tensor* d_pred,
                       Tensor* d_target);

// The tangent of mse_loss(pred, target) along (d_pred, d_target) written tp and tt:
// (2 / N) sum_i (pred[i] - target[i]) (tp[i] - tt[i]), summed in double. A symmetric bilinear
// form of the two differences, so its own tangent is a sum of two of it. All four: the same shape.
float mse_loss_tangent(const Tensor& pred, const Tensor& target, const Tensor& tp, const Tensor& tt);
// With g = d_out * 2 / N:  d_pred += g (tp - tt), d_target -= g (tp - tt), d_tp += g (pred - target),
// d_tt -= g (pred - target); each may be null (skipped). `out` is not read.
void mse_loss_tangent_pullback(const Tensor& pred, const Tensor& target, const Tensor& tp, const Tensor& tt, float out,
                               float d_out, Tensor* d_pred, Tensor* d_target, Tensor* d_tp, Tensor* d_tt);

}  // namespace llmcc
