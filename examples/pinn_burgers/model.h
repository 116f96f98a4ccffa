// A physics-informed network (PINN) for the viscous Burgers equation
//   u_t + u u_x = nu u_xx   for x in (-1, 1), t in (0, 1],
// with u given at t = 0 and on x = -1, 1. u is a tanh MLP of the point (x, t); the loss holds
// its first derivatives in x and t and its second in x: adgen's forward mode defines u_jvp (u and
// its derivative along a direction) and u_jvp2 (the jvp of u_jvp: u, u_x and u_xx in one call),
// and the reverse mode differentiates the whole loss with respect to the weights in one generated
// backward (burgers_loss_grad, burgers_loss_Entry).
#pragma once

#include <cstddef>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/ops.h"

namespace pinn_burgers {

using llmcc::Tensor;

struct Config {
  int H = 0;       // hidden units per layer
  int layers = 0;  // hidden tanh layers
};

struct Dense {
  Tensor w LLMCC_ADGEN_NAME("weight");  // (OC, IC)
  Tensor b LLMCC_ADGEN_NAME("bias");    // (OC)
};

struct Mlp {
  Config cfg;
  std::vector<Dense> hidden;  // (H, 2), then (H, H)
  Dense out;                  // (1, H)

  Mlp() = default;
  // Declares every parameter's shape (no storage); llmcc::bind_parameters(model) binds them.
  explicit Mlp(const Config& c) : cfg(c) {
    for (int i = 0; i < c.layers; ++i)
      hidden.push_back(Dense{Tensor(nullptr, {c.H, i == 0 ? 2 : c.H}), Tensor(nullptr, {c.H})});
    out = Dense{Tensor(nullptr, {1, c.H}), Tensor(nullptr, {1})};
  }
};

// u at the points p (N, 2), rows (x, t) -> (N, 1).
inline Tensor u(const Mlp& net, const Tensor& p) {
  Tensor h = p;
  for (const Dense& d : net.hidden) h = llmcc::tanh(llmcc::linear(h, d.w, d.b));  // (N, H)
  return llmcc::linear(h, net.out.w, net.out.b);
}

// u and its derivative along v (N, 2), a direction per point: (u, grad u . v), each (N, 1).
LLMCC_ADGEN_JVP("u") llmcc::adgen::Dual u_jvp(const Mlp& net, const Tensor& p, const Tensor& v);
// u_jvp differentiated along w in p: value = (u, grad u . v), tangent.tangent = v^T (hess u) w.
LLMCC_ADGEN_JVP_WRT("u_jvp", "p")
llmcc::adgen::Dual2 u_jvp2(const Mlp& net, const Tensor& p, const Tensor& v, const Tensor& w);

// The PINN loss: the mean squared residual u_t + u u_x - nu u_xx at the collocation points p
// (N, 2), plus `data_weight` times the mean squared error of u at the points pd (M, 2) where it is
// given (the initial condition and the boundary), against gd (M, 1). ex and et (N, 2) are the
// unit directions (rows (1, 0) and (0, 1)), zero (N, 1) zeros.
LLMCC_ADGEN_ENTRY LLMCC_ADGEN_WRT("net") inline float burgers_loss(const Mlp& net, const Tensor& p, const Tensor& ex,
                                                                   const Tensor& et, const Tensor& zero,
                                                                   const Tensor& pd, const Tensor& gd, float nu,
                                                                   float data_weight) {
  const llmcc::adgen::Dual2 x2 = u_jvp2(net, p, ex, ex);  // u, u_x; u_x; u_xx
  const Tensor u_t = u_jvp(net, p, et).tangent;           // (N, 1)
  const Tensor residual = u_t + x2.value.value * x2.value.tangent - nu * x2.tangent.tangent;
  return llmcc::mse_loss(residual, zero) + data_weight * llmcc::mse_loss(u(net, pd), gd);
}

}  // namespace pinn_burgers
