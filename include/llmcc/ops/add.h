// add: element-wise sum of two tensors of the same shape (the residual connection).
#pragma once

#include "llmcc/adgen.h"
#include "llmcc/tensor.h"

namespace llmcc {

// out = a + b.  a, b, out: any shape, the same for all three.
Tensor add(const Tensor& a, const Tensor& b);
// The same as add(a, b); adgen maps `a + b` on tensors to the add rule.
LLMCC_ADGEN_RULE("add") Tensor operator+(const Tensor& a, const Tensor& b);

// d_a += d_out, d_b += d_out; a null adjoint is skipped.
void add_pullback(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& d_out, Tensor* d_a, Tensor* d_b);

}  // namespace llmcc
