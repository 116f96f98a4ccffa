// mse_loss: mean squared error between a prediction and a target of the same shape (regression,
// fitting trajectories), as PyTorch's F.mse_loss with reduction "mean".
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

}  // namespace llmcc
