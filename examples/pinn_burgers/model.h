// A physics-informed network (PINN) for the viscous Burgers equation
//   u_t + u u_x = nu u_xx   for x in (-1, 1), t in (0, 1],
// with u given at t = 0 and on x = -1, 1. u is a tanh MLP of the point (x, t); the loss holds
// its first derivatives in x and t and its second in x: adgen's forward mode defines u_jvp (u and
// its derivative along a direction) and u_jvp2 (the jvp of u_jvp: u, u_x and u_xx in one call),
// and the reverse mode differentiates the whole loss with respect to the weights in one generated
// backward (burgers_loss_grad, burgers_loss_Entry).
#pragma once

#include "pinn_mlp.h"

namespace pinn_burgers {

using llmcc::Tensor;
using pinn::Mlp;

// The PINN loss: the mean squared residual u_t + u u_x - nu u_xx at the collocation points p
// (N, 2), plus `data_weight` times the mean squared error of u at the points pd (M, 2) where it is
// given (the initial condition and the boundary), against gd (M, 1). ex and et (N, 2) are the
// unit directions (rows (1, 0) and (0, 1)), zero (N, 1) zeros.
LLMCC_ADGEN_ENTRY LLMCC_ADGEN_WRT("net") inline float burgers_loss(const Mlp& net, const Tensor& p, const Tensor& ex,
                                                                   const Tensor& et, const Tensor& zero,
                                                                   const Tensor& pd, const Tensor& gd, float nu,
                                                                   float data_weight) {
  const llmcc::adgen::Dual2 x2 = pinn::u_jvp2(net, p, ex, ex);  // u, u_x; u_x; u_xx
  const Tensor u_t = pinn::u_jvp(net, p, et).tangent;           // (N, 1)
  const Tensor residual = u_t + x2.value.value * x2.value.tangent - nu * x2.tangent.tangent;
  return llmcc::mse_loss(residual, zero) + data_weight * llmcc::mse_loss(pinn::u(net, pd), gd);
}

}  // namespace pinn_burgers
