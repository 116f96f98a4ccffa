// gelu: GPT-2's activation, the tanh approximation of x * Phi(x).
#pragma once

#include "llmcc/tensor.h"

namespace llmcc {

// out = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).  x, out: any shape, the same.
Tensor gelu(const Tensor& x);

// d_x += d_out * gelu'(x),
//   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
// x, out, d_out, d_x: the shape of x. `out` is not read (tanh(u) is recomputed from x, since
// out cannot give it at x = 0). A null d_x is skipped.
void gelu_pullback(const Tensor& x, const Tensor& out, const Tensor& d_out, Tensor* d_x);

}  // namespace llmcc
