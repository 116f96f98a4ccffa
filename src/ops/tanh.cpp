// tanh: front end, forward and pullback.
#include "llmcc/ops/tanh.h"

#include "kernels/cpu/tanh.h"
#include "kernels/ref/tanh.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/check.h"

namespace llmcc {

Tensor tanh(const Tensor& x) {
  LLMCC_PROFILE("tanh.fwd");
  check::defined("tanh", "x", x);
  Tensor out = new_tensor(x.shape(), "tanh");  // shape of x
  if (kernel_mode() == KernelMode::Reference) {
    ref::tanh_forward(out.f32(), x.f32(), x.numel());
  } else {
    cpu::tanh_forward(out.f32(), x.f32(), x.numel());
  }
  return out;
}

void tanh_pullback(const Tensor& x, const Tensor& out, const Tensor& d_out, Tensor* d_x) {
  LLMCC_PROFILE("tanh.bwd");
  (void)out;
  check::same_shape("tanh", "x", x, "d_out", d_out);
  check::adjoint("tanh", "d_x", d_x, x);
  if (!d_x) return;
  if (kernel_mode() == KernelMode::Reference) {
    ref::tanh_backward(d_x->f32(), x.f32(), d_out.f32(), x.numel());
  } else {
    cpu::tanh_backward(d_x->f32(), x.f32(), d_out.f32(), x.numel());
  }
}

}  // namespace llmcc
