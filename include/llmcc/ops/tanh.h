// tanh: the hyperbolic tangent, the activation of physics-informed networks and small MLPs.
#pragma once

#include "llmcc/tensor.h"

namespace llmcc {

// out = tanh(x).  x, out: any shape, the same for both.
Tensor tanh(const Tensor& x);

// d_x += d_out * (1 - tanh(x)^2).  x, out, d_out, d_x: the shape of x. `out` is not read (the
// fast kernel recomputes tanh from x in the same pass). A null d_x is skipped.
void tanh_pullback(const Tensor& x, const Tensor& out, const Tensor& d_out, Tensor* d_x);

}  // namespace llmcc
