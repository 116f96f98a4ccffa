// mul: element-wise product of two tensors of the same shape (SwiGLU's silu(x W1) * (x W3)).
#pragma once

#include "llmcc/adgen.h"
#include "llmcc/tensor.h"

namespace llmcc {

// out = a * b element-wise.  a, b, out: any shape, the same for all three.
Tensor mul(const Tensor& a, const Tensor& b);
// The same as mul(a, b); adgen maps `a * b` on two tensors to the mul rule.
LLMCC_ADGEN_RULE("mul") Tensor operator*(const Tensor& a, const Tensor& b);

// d_a += d_out * b, d_b += d_out * a; a null adjoint is skipped. d_a and d_b may be the same
// tensor (`x * x`): it then receives both contributions, (a + b) * d_out. `out` is not read.
void mul_pullback(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& d_out, Tensor* d_a, Tensor* d_b);

}  // namespace llmcc
