// silu: x * sigmoid(x), the activation of Llama's SwiGLU MLP.
#pragma once

#include "llmcc/tensor.h"

namespace llmcc {

// out = x * sigmoid(x) = x / (1 + exp(-x)).  x, out: any shape, the same for both.
Tensor silu(const Tensor& x);

// d_x += d_out * silu'(x), silu'(x) = s * (1 + x * (1 - s)) with s = sigmoid(x).
// x, out, d_out, d_x: the shape of x. `out` is not read (s is recomputed from x, since
// out / x fails at x = 0). A null d_x is skipped.
void silu_pullback(const Tensor& x, const Tensor& out, const Tensor& d_out, Tensor* d_x);

}  // namespace llmcc
