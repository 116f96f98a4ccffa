// sub: subtraction on tensors: the difference of two of the same shape (a - b), the negation of
// one (-x) and a float minus one (s - x, as in a gate's 1 - g).
#pragma once

#include "llmcc/adgen.h"
#include "llmcc/tensor.h"

namespace llmcc {

// out = a - b.  a, b, out: any shape, the same for all three; or b broadcast as add's operands
// may be (one element, a row vector or a column vector of a), the output then a's shape. A
// broadcast minuend is written -(x - row); so is a one-element a with fewer axes than a
// one-element b (an error names it), whose result add's rule would give b's shape.
Tensor sub(const Tensor& a, const Tensor& b);
// The same as sub(a, b); adgen maps `a - b` on two tensors to the sub rule.
LLMCC_ADGEN_RULE("sub") Tensor operator-(const Tensor& a, const Tensor& b);
// d_a += d_out, d_b -= d_out; a null adjoint is skipped. d_a and d_b may be the same tensor
// (`x - x`): it then receives both, which cancel. `out` is not read.
void sub_pullback(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& d_out, Tensor* d_a, Tensor* d_b);

// out = -x.  x, out: any shape, the same for both.
Tensor neg(const Tensor& x);
// The same as neg(x); adgen maps unary `-x` on a tensor to the neg rule.
LLMCC_ADGEN_RULE("neg") Tensor operator-(const Tensor& x);
// d_x -= d_out. `out` is not read.
void neg_pullback(const Tensor& x, const Tensor& out, const Tensor& d_out, Tensor* d_x);

// out = s - x.  x, out: any shape, the same for both.
Tensor rsub(float s, const Tensor& x);
// The same as rsub(s, x); adgen maps `s - x` (a float minus a tensor) to the rsub rule.
LLMCC_ADGEN_RULE("rsub") Tensor operator-(float s, const Tensor& x);
// *d_s += sum(d_out) (summed in double, in a fixed order), d_x -= d_out; a null adjoint is
// skipped. `out` is not read.
void rsub_pullback(float s, const Tensor& x, const Tensor& out, const Tensor& d_out, float* d_s, Tensor* d_x);

}  // namespace llmcc
