// scale: front end, forward and pullback (the rule adgen calls for `s * x` and `x * s`).
#include "llmcc/ops/scale.h"

#include "kernels/cpu/scale.h"
#include "kernels/ref/scale.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/check.h"

namespace llmcc {

Tensor scale(const Tensor& x, float s) {
  LLMCC_PROFILE("scale.fwd");
  check::defined("scale", "x", x);
  Tensor out = new_tensor(x.shape(), "scale");  // shape of x
  if (kernel_mode() == KernelMode::Reference) {
    ref::scale_forward(out.f32(), x.f32(), s, x.numel());
  } else {
    cpu::scale_forward(out.f32(), x.f32(), s, x.numel());
  }
  return out;
}

Tensor operator*(float s, const Tensor& x) { return scale(x, s); }
Tensor operator*(const Tensor& x, float s) { return scale(x, s); }

void scale_pullback(const Tensor& x, float s, const Tensor& out, const Tensor& d_out, Tensor* d_x, float* d_s) {
  LLMCC_PROFILE("scale.bwd");
  (void)out;  // linear in x: the backward needs x (for d_s) and s, not the output
  check::same_shape("scale", "x", x, "d_out", d_out);
  check::adjoint("scale", "d_x", d_x, x);
  float* dx = d_x ? d_x->f32() : nullptr;
  if (kernel_mode() == KernelMode::Reference) {
    ref::scale_backward(dx, d_s, x.f32(), s, d_out.f32(), x.numel());
  } else {
    cpu::scale_backward(dx, d_s, x.f32(), s, d_out.f32(), x.numel());
  }
}

}  // namespace llmcc
