// mul: element-wise product of two tensors (SwiGLU's silu(x W1) * (x W3)), one of them possibly
// broadcast (a gain per channel, a gate per row, a learnable scalar).
#pragma once

#include "llmcc/adgen.h"
#include "llmcc/tensor.h"

namespace llmcc {

// out = a * b element-wise.  a, b, out: any shape, the same for all three; or see broadcasting.
// Broadcasting: either operand may instead be one element (a learnable scalar), a row vector
// ((C) or (1, ..., 1, C): one value per index of the other's last axis, as a bias) or a column
// vector (the other's shape with its last axis 1: one value per row, as a per-token gate); the
// output then has the other operand's shape (of two one-element operands, the shape with more
// axes, as when their sizes are larger), and the pullback sums the broadcast operand's adjoint
// over everything each of its values reached (in double, in a fixed order).
Tensor mul(const Tensor& a, const Tensor& b);
// The same as mul(a, b); adgen maps `a * b` on two tensors to the mul rule.
LLMCC_ADGEN_RULE("mul") Tensor operator*(const Tensor& a, const Tensor& b);

// d_a += d_out * b, d_b += d_out * a (summed as above for a broadcast operand); a null adjoint
// is skipped. d_a and d_b may be the same tensor (`x * x`): it then receives both contributions,
// (a + b) * d_out. `out` is not read.
void mul_pullback(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& d_out, Tensor* d_a, Tensor* d_b);

}  // namespace llmcc
