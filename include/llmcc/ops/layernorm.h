// layernorm: normalise each row of x over its last dim, then scale and shift (GPT-2, eps 1e-5).
#pragma once

#include "llmcc/tensor.h"

namespace llmcc {

// What the backward reads besides x and w: each row's mean and 1/sqrt(var + eps).
struct LayerNormSaved {
  Tensor mean;  // (N)
  Tensor rstd;  // (N)
};

// out = (x - mean) * rstd * w + b, row by row.
// x, out: (N, C) or (B, T, C), N = product of the leading dims; w, b: (C).
Tensor layernorm(const Tensor& x, const Tensor& w, const Tensor& b);
// The same, also filling saved.mean and saved.rstd (N) from the current arena.
Tensor layernorm_fwd(const Tensor& x, const Tensor& w, const Tensor& b, LayerNormSaved& saved);

// d_x += dL/dx, d_w += dL/dw, d_b += dL/db for the d_out given; a null adjoint is skipped.
// `out` is not read (the backward needs only x, w and saved).
void layernorm_pullback(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& out,
                        const LayerNormSaved& saved, const Tensor& d_out, Tensor* d_x, Tensor* d_w, Tensor* d_b);

}  // namespace llmcc
