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

Tensor tanh_tangent(const Tensor& y, const Tensor& t) {
  LLMCC_PROFILE("tanh_tangent.fwd");
  check::defined("tanh_tangent", "y", y);
  check::same_shape("tanh_tangent", "y", y, "t", t);
  Tensor out = new_tensor(y.shape(), "tanh_tangent");  // shape of y
  if (kernel_mode() == KernelMode::Reference) {
    ref::tanh_tangent_forward(out.f32(), y.f32(), t.f32(), y.numel());
  } else {
    cpu::tanh_tangent_forward(out.f32(), y.f32(), t.f32(), y.numel());
  }
  return out;
}

void tanh_tangent_pullback(const Tensor& y, const Tensor& t, const Tensor& out, const Tensor& d_out, Tensor* d_y,
                           Tensor* d_t) {
  LLMCC_PROFILE("tanh_tangent.bwd");
  (void)out;
  check::same_shape("tanh_tangent", "y", y, "t", t);
  check::same_shape("tanh_tangent", "y", y, "d_out", d_out);
  check::adjoint("tanh_tangent", "d_y", d_y, y);
  check::adjoint("tanh_tangent", "d_t", d_t, t);
  float* dy = d_y ? d_y->f32() : nullptr;  // shape of y
  float* dt = d_t ? d_t->f32() : nullptr;  // shape of t
  if (kernel_mode() == KernelMode::Reference) {
    ref::tanh_tangent_backward(dy, dt, y.f32(), t.f32(), d_out.f32(), y.numel());
  } else {
    cpu::tanh_tangent_backward(dy, dt, y.f32(), t.f32(), d_out.f32(), y.numel());
  }
}

Tensor tanh_tangent2(const Tensor& y, const Tensor& t, const Tensor& ty, const Tensor& tt) {
  LLMCC_PROFILE("tanh_tangent2.fwd");
  check::defined("tanh_tangent2", "y", y);
  check::same_shape("tanh_tangent2", "y", y, "t", t);
  check::same_shape("tanh_tangent2", "y", y, "ty", ty);
  check::same_shape("tanh_tangent2", "y", y, "tt", tt);
  Tensor out = new_tensor(y.shape(), "tanh_tangent2");  // shape of y
  if (kernel_mode() == KernelMode::Reference) {
    ref::tanh_tangent2_forward(out.f32(), y.f32(), t.f32(), ty.f32(), tt.f32(), y.numel());
  } else {
    cpu::tanh_tangent2_forward(out.f32(), y.f32(), t.f32(), ty.f32(), tt.f32(), y.numel());
  }
  return out;
}

void tanh_tangent2_pullback(const Tensor& y, const Tensor& t, const Tensor& ty, const Tensor& tt, const Tensor& out,
                            const Tensor& d_out, Tensor* d_y, Tensor* d_t, Tensor* d_ty, Tensor* d_tt) {
  LLMCC_PROFILE("tanh_tangent2.bwd");
  (void)out;
  check::same_shape("tanh_tangent2", "y", y, "t", t);
  check::same_shape("tanh_tangent2", "y", y, "ty", ty);
  check::same_shape("tanh_tangent2", "y", y, "tt", tt);
  check::same_shape("tanh_tangent2", "y", y, "d_out", d_out);
  check::adjoint("tanh_tangent2", "d_y", d_y, y);
  check::adjoint("tanh_tangent2", "d_t", d_t, t);
  check::adjoint("tanh_tangent2", "d_ty", d_ty, ty);
  check::adjoint("tanh_tangent2", "d_tt", d_tt, tt);
  auto data = [](Tensor* d) { return d ? d->f32() : nullptr; };
  if (kernel_mode() == KernelMode::Reference) {
    ref::tanh_tangent2_backward(data(d_y), data(d_t), data(d_ty), data(d_tt), y.f32(), t.f32(), ty.f32(), tt.f32(),
                                d_out.f32(), y.numel());
  } else {
    cpu::tanh_tangent2_backward(data(d_y), data(d_t), data(d_ty), data(d_tt), y.f32(), t.f32(), ty.f32(), tt.f32(),
                                d_out.f32(), y.numel());
  }
}

}  // namespace llmcc
