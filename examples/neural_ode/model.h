// A neural ODE (Chen et al. 2018) in its simplest, discretise-then-optimise form: the state
// x (B, D) follows dx/dt = f(x) with f a small tanh MLP, integrated by a counted loop of
// classical Runge-Kutta (RK4) steps inside the forward, and the loss is the mean squared error
// between the integrated states and an observed trajectory at every step. adgen differentiates
// through the whole loop (ode_loss_grad): the backward walks the time steps in reverse, which is
// backpropagation through the solver, and generates the trait the Trainer takes
// (ode_loss_Entry).
#pragma once

#include <cmath>
#include <cstdint>

#include "llmcc/adgen.h"
#include "llmcc/ops/add.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/mse_loss.h"
#include "llmcc/ops/scale.h"
#include "llmcc/ops/view.h"

namespace neural_ode {

using llmcc::Shape;
using llmcc::Tensor;

// The hidden activation, element-wise: adgen differentiates the scalar function itself.
inline float tanh_act(float x) { return std::tanh(x); }

struct Config {
  int D = 0;        // state dimension
  int H = 0;        // hidden units of f
  float dt = 0.0f;  // time step of the solver (and of the observations)
};

struct Linear {
  Tensor w LLMCC_ADGEN_NAME("weight");                                      // (OC, IC)
  Tensor b LLMCC_ADGEN_NAME("bias");                                        // (OC)
  Tensor forward(const Tensor& x) const { return llmcc::linear(x, w, b); }  // (B, IC) -> (B, OC)
};

// f(x): the learned vector field, (B, D) -> (B, D).
struct VectorField {
  Linear fc1;  // (H, D)
  Linear fc2;  // (H, H)
  Linear out;  // (D, H)
  Tensor forward(const Tensor& x) const {
    Tensor h = llmcc::adgen::map_unary<tanh_act>(fc1.forward(x), "tanh");  // (B, H)
    h = llmcc::adgen::map_unary<tanh_act>(fc2.forward(h), "tanh");         // (B, H)
    return out.forward(h);                                                 // (B, D)
  }
};

struct NeuralOde {
  Config cfg;
  VectorField f;

  NeuralOde() = default;
  // Declares every parameter's shape (no storage); llmcc::bind_parameters(model) binds them in
  // the order adgen lists them (the fields': f.fc1.weight, f.fc1.bias, ..., f.out.bias).
  explicit NeuralOde(const Config& c)
      : cfg(c),
        f{Linear{Tensor(nullptr, {c.H, c.D}), Tensor(nullptr, {c.H})},
          Linear{Tensor(nullptr, {c.H, c.H}), Tensor(nullptr, {c.H})},
          Linear{Tensor(nullptr, {c.D, c.H}), Tensor(nullptr, {c.D})}} {}

  // One classical Runge-Kutta step of size dt: x (B, D) at t -> the state at t + dt.
  Tensor rk4_step(const Tensor& x) const {
    const float dt = cfg.dt;
    Tensor k1 = f.forward(x);
    Tensor k2 = f.forward(x + (0.5f * dt) * k1);
    Tensor k3 = f.forward(x + (0.5f * dt) * k2);
    Tensor k4 = f.forward(x + dt * k3);
    return x + (dt / 6.0f) * (k1 + 2.0f * k2 + 2.0f * k3 + k4);
  }
};

// Mean over the S observed steps of the mean squared error of the integrated state.
// x0: (B, D) initial states; traj: (S, B, D), traj[k] observed at t = (k + 1) dt. Only the model
// gets a gradient (the data are constants).
LLMCC_ADGEN_ENTRY LLMCC_ADGEN_WRT("m") inline float ode_loss(const NeuralOde& m, const Tensor& x0, const Tensor& traj) {
  const int S = static_cast<int>(traj.dim(0));
  const std::int64_t B = x0.dim(0), D = x0.dim(1);
  Tensor x = x0;
  float loss = 0.0f;
  for (int k = 0; k < S; ++k) {
    x = m.rk4_step(x);                                                      // (B, D) at t = (k + 1) dt
    loss += llmcc::mse_loss(x, llmcc::view(traj, Shape{B, D}, k * B * D));  // against traj[k]
  }
  return loss / static_cast<float>(S);
}

}  // namespace neural_ode
