// mean_pool: the mean of a sequence's vectors, (B, T, C) -> (B, C) (an encoder's pooling before
// a classification head).
#pragma once

#include "llmcc/tensor.h"

namespace llmcc {

// out[b, c] = (1 / T) sum_t x[b, t, c].  x: (B, T, C); out: (B, C).
Tensor mean_pool(const Tensor& x);

// d_x[b, t, c] += d_out[b, c] / T.  d_out: (B, C); d_x: (B, T, C) or null (skipped).
// `out` is not read.
void mean_pool_pullback(const Tensor& x, const Tensor& out, const Tensor& d_out, Tensor* d_x);

}  // namespace llmcc
