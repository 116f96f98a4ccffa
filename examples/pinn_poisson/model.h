// A physics-informed network (PINN) for the 2D Poisson equation
//   -(u_xx + u_yy) = f  in (0, 1)^2,   u = g  on the boundary,
// u approximated by a tanh MLP of the point (x, y). The loss holds the network's second
// derivatives with respect to its input: adgen's forward mode defines u_jvp (u and its directional
// derivative) and u_jvp2 (the jvp of u_jvp, whose tangent.tangent is the second derivative along a
// direction), and the reverse mode differentiates the loss, second derivatives included, with
// respect to the weights in one generated backward (poisson_loss_grad, poisson_loss_Entry).
#pragma once

#include "pinn_mlp.h"

namespace pinn_poisson {

using llmcc::Tensor;
using pinn::Mlp;

// The PINN loss: the mean squared residual of the equation at the interior points plus
// `bc_weight` times the mean squared boundary error. p (N, 2) interior points, minus_f (N, 1) the
// values -f(p), ex and ey (N, 2) the unit directions (rows (1, 0) and (0, 1)); pb (M, 2) boundary
// points, g (M, 1) the boundary values.
LLMCC_ADGEN_ENTRY LLMCC_ADGEN_WRT("net") inline float poisson_loss(const Mlp& net, const Tensor& p,
                                                                   const Tensor& minus_f, const Tensor& ex,
                                                                   const Tensor& ey, const Tensor& pb, const Tensor& g,
                                                                   float bc_weight) {
  const Tensor u_xx = pinn::u_jvp2(net, p, ex, ex).tangent.tangent;  // (N, 1)
  const Tensor u_yy = pinn::u_jvp2(net, p, ey, ey).tangent.tangent;  // (N, 1)
  return llmcc::mse_loss(u_xx + u_yy, minus_f) + bc_weight * llmcc::mse_loss(pinn::u(net, pb), g);
}

}  // namespace pinn_poisson
