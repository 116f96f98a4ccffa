// scale: multiply a tensor by a scalar (attention's 1/sqrt(HS), residual scaling, loss scaling).
#pragma once

#include "llmcc/adgen.h"
#include "llmcc/tensor.h"

namespace llmcc {

// out = s * x.  x, out: any shape, the same for both.
Tensor scale(const Tensor& x, float s);
// The same as scale(x, s); adgen maps `s * x` and `x * s` (float and tensor) to the scale rule.
LLMCC_ADGEN_RULE("scale") Tensor operator*(float s, const Tensor& x);
LLMCC_ADGEN_RULE("scale") Tensor operator*(const Tensor& x, float s);

// d_x += s * d_out;  *d_s += sum(d_out * x), summed in double.  x, out, d_out, d_x: the shape
// of x. A null adjoint is skipped (with it, the work only it needs). `out` is not read.
void scale_pullback(const Tensor& x, float s, const Tensor& out, const Tensor& d_out, Tensor* d_x, float* d_s);

}  // namespace llmcc
