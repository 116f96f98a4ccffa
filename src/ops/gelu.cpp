// gelu: front end, forward and pullback.
#include "llmcc/ops/gelu.h"

#include "kernels/cpu/gelu.h"
#include "kernels/ref/gelu.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/adjoint.h"
#include "ops/check.h"

namespace llmcc {

Tensor gelu(const Tensor& x) {
  LLMCC_PROFILE("gelu.fwd");
  check::defined("gelu", "x", x);
  Tensor out = new_tensor(x.shape(), "gelu");  // shape of x
  if (kernel_mode() == KernelMode::Reference) {
    ref::gelu_forward(out.f32(), x.f32(), x.numel());
  } else {
    cpu::gelu_forward(out.f32(), x.f32(), x.numel());
  }
  return out;
}

void gelu_pullback(const Tensor& x, const Tensor& out, const Tensor& d_out, Tensor* d_x) {
  LLMCC_PROFILE("gelu.bwd");
  (void)out;  // gelu' needs tanh(u), which out = 0.5 x (1 + tanh u) cannot give at x = 0
  check::same_shape("gelu", "x", x, "d_out", d_out);
  check::adjoint("gelu", "d_x", d_x, x);
  if (!d_x) return;
  bool overwrite = false;
  float* dx = adjoint_data(d_x, &overwrite);  // shape of x
  if (kernel_mode() == KernelMode::Reference) {
    ref::gelu_backward(dx, x.f32(), d_out.f32(), x.numel());
  } else {
    cpu::gelu_backward(dx, x.f32(), d_out.f32(), x.numel(), overwrite);
  }
}

}  // namespace llmcc
