// rmsnorm: scale each row of x by 1/rms over its last dim, then by w (Llama's RMSNorm).
#pragma once

#include "llmcc/tensor.h"

namespace llmcc {

// What the backward reads besides x and w: each row's 1/sqrt(mean(x^2) + eps).
struct RmsNormSaved {
  Tensor rstd;  // (N)
};

// out = x * rstd * w, row by row, rstd = 1/sqrt(mean(x^2) + eps).
// x, out: (N, C) or (B, T, C), N = product of the leading dims; w: (C). eps > 0 is config (no
// adjoint).
Tensor rmsnorm(const Tensor& x, const Tensor& w, float eps);
// The same, also filling saved.rstd (N) from the current arena.
Tensor rmsnorm_fwd(const Tensor& x, const Tensor& w, float eps, RmsNormSaved& saved);

// d_x += dL/dx, d_w += dL/dw for the d_out given; a null adjoint is skipped. `out` is not read.
void rmsnorm_pullback(const Tensor& x, const Tensor& w, float eps, const Tensor& out, const RmsNormSaved& saved,
                      const Tensor& d_out, Tensor* d_x, Tensor* d_w);

}  // namespace llmcc
