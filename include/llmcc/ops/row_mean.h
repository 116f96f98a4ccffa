// row_mean: the mean of each row over the last axis, kept as a column (a per-row statistic that
// mul, add and sub broadcast back over the row). The tangents of rmsnorm and layernorm are
// written with it, so that they stay differentiable to any order.
#pragma once

#include "llmcc/tensor.h"

namespace llmcc {

// out[r, 0] = (1 / C) sum_c x[r, c].  x: (..., C), 1 to 4 dims, C > 0; out: x's shape with its
// last axis 1 (a column vector of x).
Tensor row_mean(const Tensor& x);

// d_x[r, c] += d_out[r, 0] / C.  d_out: out's shape; d_x: x's shape or null (skipped). `out` is
// not read.
void row_mean_pullback(const Tensor& x, const Tensor& out, const Tensor& d_out, Tensor* d_x);

}  // namespace llmcc
