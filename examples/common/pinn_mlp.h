// What the physics-informed examples share: the network u (a tanh MLP of the point), its jvp
// and the jvp of that jvp, which adgen defines (LLMCC_ADGEN_JVP), and the usual start for tanh
// networks. Each example's model.h includes this and adds its equation's loss.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/ops.h"
#include "llmcc/train/rng.h"

namespace pinn {

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
// u_jvp differentiated along w in p: value = (u, grad u . v), tangent = (grad u . w, v^T (hess u) w).
// With w = v (u_jvp2(net, p, e, e)) adgen takes its Taylor path: u, u_e and u_ee in three streams.
LLMCC_ADGEN_JVP_WRT("u_jvp", "p")
llmcc::adgen::Dual2 u_jvp2(const Mlp& net, const Tensor& p, const Tensor& v, const Tensor& w);

// Glorot-normal weights, zero biases.
inline void glorot_init(Mlp& m, std::uint64_t seed) {
  llmcc::Rng rng(seed);
  auto glorot = [&](Tensor& w) {
    const double fan = static_cast<double>(w.dim(0) + w.dim(1));
    rng.fill_normal(w.f32(), static_cast<std::size_t>(w.numel()), 0.0f, static_cast<float>(std::sqrt(2.0 / fan)));
  };
  for (auto& d : m.hidden) glorot(d.w);
  glorot(m.out.w);
}

}  // namespace pinn
