// tanh: the hyperbolic tangent, the activation of physics-informed networks and small MLPs, and
// its tangents for adgen's forward mode (one pass each instead of a chain of mul and rsub).
#pragma once

#include "llmcc/tensor.h"

namespace llmcc {

// out = tanh(x).  x, out: any shape, the same for both.
Tensor tanh(const Tensor& x);

// d_x += d_out * (1 - tanh(x)^2).  x, out, d_out, d_x: the shape of x. `out` is not read (the
// fast kernel recomputes tanh from x in the same pass). A null d_x is skipped.
void tanh_pullback(const Tensor& x, const Tensor& out, const Tensor& d_out, Tensor* d_x);

// The tangent of tanh along t, given its output y: out = t (1 - y^2).  y, t, out: the same shape.
Tensor tanh_tangent(const Tensor& y, const Tensor& t);
// d_y += -2 y t d_out, d_t += (1 - y^2) d_out; a null adjoint is skipped. `out` is not read.
void tanh_tangent_pullback(const Tensor& y, const Tensor& t, const Tensor& out, const Tensor& d_out, Tensor* d_y,
                           Tensor* d_t);

// The tangent of tanh_tangent(y, t) along (ty, tt): out = tt (1 - y^2) - 2 y ty t, a second
// derivative's term.  y, t, ty, tt, out: the same shape.
Tensor tanh_tangent2(const Tensor& y, const Tensor& t, const Tensor& ty, const Tensor& tt);
// With g = d_out: d_y += -2 (y tt + ty t) g, d_t += -2 y ty g, d_ty += -2 y t g,
// d_tt += (1 - y^2) g; a null adjoint is skipped. `out` is not read.
void tanh_tangent2_pullback(const Tensor& y, const Tensor& t, const Tensor& ty, const Tensor& tt, const Tensor& out,
                            const Tensor& d_out, Tensor* d_y, Tensor* d_t, Tensor* d_ty, Tensor* d_tt);

}  // namespace llmcc
