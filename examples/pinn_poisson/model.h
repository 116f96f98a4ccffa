// A physics-informed network (PINN) for the 2D Poisson equation
//   -(u_xx + u_yy) = f  in (0, 1)^2,   u = g  on the boundary,
// u approximated by a tanh MLP of the point (x, y). The loss holds the network's second
// derivatives with respect to its input: adgen's forward mode defines u_jvp (u and its directional
// derivative) and u_jvp2 (the jvp of u_jvp, whose tangent.tangent is the second derivative along a
// direction), and the reverse mode differentiates the loss, second derivatives included, with
// respect to the weights in one generated backward (poisson_loss_grad, poisson_loss_Entry).
#pragma once

#include <cstddef>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/ops.h"

namespace pinn_poisson {

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

// u at the points p (N, 2) -> (N, 1).
inline Tensor u(const Mlp& net, const Tensor& p) {
  Tensor h = p;
  for (const Dense& d : net.hidden) h = llmcc::tanh(llmcc::linear(h, d.w, d.b));  // (N, H)
  return llmcc::linear(h, net.out.w, net.out.b);
}

// u and its derivative along v (N, 2), a direction per point: (u, grad u . v), each (N, 1).
LLMCC_ADGEN_JVP("u") llmcc::adgen::Dual u_jvp(const Mlp& net, const Tensor& p, const Tensor& v);
// u_jvp differentiated along w in p: tangent.tangent is the second derivative v^T (hess u) w.
LLMCC_ADGEN_JVP_WRT("u_jvp", "p")
llmcc::adgen::Dual2 u_jvp2(const Mlp& net, const Tensor& p, const Tensor& v, const Tensor& w);

// The PINN loss: the mean squared residual of the equation at the interior points plus
// `bc_weight` times the mean squared boundary error. p (N, 2) interior points, minus_f (N, 1) the
// values -f(p), ex and ey (N, 2) the unit directions (rows (1, 0) and (0, 1)); pb (M, 2) boundary
// points, g (M, 1) the boundary values.
LLMCC_ADGEN_ENTRY LLMCC_ADGEN_WRT("net") inline float poisson_loss(const Mlp& net, const Tensor& p,
                                                                   const Tensor& minus_f, const Tensor& ex,
                                                                   const Tensor& ey, const Tensor& pb, const Tensor& g,
                                                                   float bc_weight) {
  const Tensor u_xx = u_jvp2(net, p, ex, ex).tangent.tangent;  // (N, 1)
  const Tensor u_yy = u_jvp2(net, p, ey, ey).tangent.tangent;  // (N, 1)
  return llmcc::mse_loss(u_xx + u_yy, minus_f) + bc_weight * llmcc::mse_loss(u(net, pb), g);
}

}  // namespace pinn_poisson
