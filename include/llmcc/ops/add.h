// add: element-wise sum of two tensors (the residual connection), one of them possibly broadcast
// (a bias per channel, a shift per row, a learnable scalar).
#pragma once

#include "llmcc/adgen.h"
#include "llmcc/tensor.h"

namespace llmcc {

// out = a + b.  a, b, out: any shape, the same for all three; or see broadcasting below.
// Broadcasting: either operand may instead be one element (a learnable scalar), a row vector
// ((C) or (1, ..., 1, C): one value per index of the other's last axis, as a bias) or a column
// vector (the other's shape with its last axis 1: one value per row, as a per-token gate); the
// output then has the other operand's shape (of two one-element operands, the shape with more
// axes, as when their sizes are larger), and the pullback sums the broadcast operand's adjoint
// over everything each of its values reached (in double, in a fixed order).
Tensor add(const Tensor& a, const Tensor& b);
// The same as add(a, b); adgen maps `a + b` on tensors to the add rule.
LLMCC_ADGEN_RULE("add") Tensor operator+(const Tensor& a, const Tensor& b);

// d_a += d_out, d_b += d_out (summed as above for a broadcast operand); a null adjoint is
// skipped.
void add_pullback(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& d_out, Tensor* d_a, Tensor* d_b);

}  // namespace llmcc
