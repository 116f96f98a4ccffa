// Gradient norm, global-norm clipping and scaling over a flat gradient store.
//
// The norm is sqrt(sum of g^2) over every element of every tensor, accumulated in double over
// fixed chunks of the flat buffer and summed in chunk order, so it does not depend on the
// thread count. (The store's alignment padding is zero and adds nothing.)
//
// clip_grad_norm follows torch.nn.utils.clip_grad_norm_: with norm = grad_norm(grads),
// if max_norm / (norm + 1e-6) < 1 every gradient is multiplied by that factor (in float);
// otherwise nothing changes. It returns the norm before clipping (what the logs show).
// A non-finite norm is returned as is and the gradients are left alone, so the caller can
// report it.
//
// Gradient accumulation is the caller's: gradients of micro-batches accumulate by +=, then
// scale_grads(grads, 1.0f / micro_batches) turns the sum into the mean.
#pragma once

#include <cstddef>

#include "llmcc/parameters.h"

namespace llmcc {

double grad_norm(const ParameterStore& grads);
// The sum of squares behind grad_norm, over any span of floats (a rank's shard of the gradient).
double sum_of_squares(const float* g, std::size_t size);
void scale_floats(float* g, std::size_t size, float factor);
// Throws llmcc::Error if max_norm <= 0.
double clip_grad_norm(ParameterStore& grads, double max_norm);
// The factor clip_grad_norm scales by for a gradient of norm `norm`: max_norm / (norm + 1e-6)
// when that is below 1, else 1 (also for a non-finite norm, or max_norm <= 0: clipping off). For
// gradients held in parts (a data-parallel rank's shard) that are scaled with scale_floats.
float clip_factor(double norm, double max_norm);
void scale_grads(ParameterStore& grads, float factor);

}  // namespace llmcc
