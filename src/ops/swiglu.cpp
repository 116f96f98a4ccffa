// swiglu: front end, forward and pullback.
#include "llmcc/ops/swiglu.h"

#include "kernels/cpu/swiglu.h"
#include "kernels/ref/swiglu.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/adjoint.h"
#include "ops/check.h"

namespace llmcc {

Tensor swiglu(const Tensor& g, const Tensor& up) {
  LLMCC_PROFILE("swiglu.fwd");
  check::defined("swiglu", "g", g);
  check::defined("swiglu", "up", up);
  check::same_shape("swiglu", "g", g, "up", up);
  Tensor out = new_tensor(g.shape(), "swiglu");  // shape of g
  if (kernel_mode() == KernelMode::Reference) {
    ref::swiglu_forward(out.f32(), g.f32(), up.f32(), g.numel());
  } else {
    cpu::swiglu_forward(out.f32(), g.f32(), up.f32(), g.numel());
  }
  return out;
}

void swiglu_pullback(const Tensor& g, const Tensor& up, const Tensor& out, const Tensor& d_out, Tensor* d_g,
                     Tensor* d_up) {
  LLMCC_PROFILE("swiglu.bwd");
  (void)out;  // silu(g) is recomputed from g
  check::same_shape("swiglu", "g", g, "up", up);
  check::same_shape("swiglu", "g", g, "d_out", d_out);
  check::adjoint("swiglu", "d_g", d_g, g);
  check::adjoint("swiglu", "d_up", d_up, up);
  if (!d_g && !d_up) return;
  // The first term to reach an adjoint may write it; with one tensor for both, that is d_up's.
  bool overwrite_up = false, overwrite_g = false;
  float* dup = adjoint_data(d_up, &overwrite_up);  // shape of g
  float* dg = d_g == d_up ? dup : adjoint_data(d_g, &overwrite_g);
  if (kernel_mode() == KernelMode::Reference) {
    ref::swiglu_backward(dg, dup, g.f32(), up.f32(), d_out.f32(), g.numel());
  } else {
    cpu::swiglu_backward(dg, overwrite_g, dup, overwrite_up, g.f32(), up.f32(), d_out.f32(), g.numel());
  }
}

}  // namespace llmcc
