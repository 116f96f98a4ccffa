// silu: front end, forward and pullback.
#include "llmcc/ops/silu.h"

#include "kernels/cpu/silu.h"
#include "kernels/ref/silu.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/check.h"

namespace llmcc {

Tensor silu(const Tensor& x) {
  LLMCC_PROFILE("silu.fwd");
  check::defined("silu", "x", x);
  Tensor out = new_tensor(x.shape(), "silu");  // shape of x
  if (kernel_mode() == KernelMode::Reference) {
    ref::silu_forward(out.f32(), x.f32(), x.numel());
  } else {
    cpu::silu_forward(out.f32(), x.f32(), x.numel());
  }
  return out;
}

void silu_pullback(const Tensor& x, const Tensor& out, const Tensor& d_out, Tensor* d_x) {
  LLMCC_PROFILE("silu.bwd");
  (void)out;  // silu' needs sigmoid(x), which out = x * sigmoid(x) cannot give at x = 0
  check::same_shape("silu", "x", x, "d_out", d_out);
  check::adjoint("silu", "d_x", d_x, x);
  if (!d_x) return;
  if (kernel_mode() == KernelMode::Reference) {
    ref::silu_backward(d_x->f32(), x.f32(), d_out.f32(), x.numel());
  } else {
    cpu::silu_backward(d_x->f32(), x.f32(), d_out.f32(), x.numel());
  }
}

}  // namespace llmcc
