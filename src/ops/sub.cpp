// sub: front ends, forwards and pullbacks of a - b, -x and s - x (the rules adgen calls for
// those expressions on tensors).
#include "llmcc/ops/sub.h"

#include "kernels/cpu/sub.h"
#include "kernels/ref/sub.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/adjoint.h"
#include "ops/broadcast.h"
#include "ops/check.h"

namespace llmcc {

Tensor sub(const Tensor& a, const Tensor& b) {
  LLMCC_PROFILE("sub.fwd");
  const BinaryShapes s = binary_shapes("sub", a, b, /*either_side=*/false);
  Tensor out = new_tensor(a.shape(), "sub");  // shape of a
  if (s.broadcast) {
    broadcast_forward(cpu::BinaryKind::Sub, s, a, b, out);
  } else if (kernel_mode() == KernelMode::Reference) {
    ref::sub_forward(out.f32(), a.f32(), b.f32(), a.numel());
  } else {
    cpu::sub_forward(out.f32(), a.f32(), b.f32(), a.numel());
  }
  return out;
}

Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }

void sub_pullback(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& d_out, Tensor* d_a, Tensor* d_b) {
  LLMCC_PROFILE("sub.bwd");
  (void)out;
  const BinaryShapes s = binary_shapes("sub", a, b, /*either_side=*/false);
  if (s.broadcast) return broadcast_pullback("sub", cpu::BinaryKind::Sub, s, a, b, d_out, d_a, d_b);
  check::same_shape("sub", "a", a, "d_out", d_out);
  check::adjoint("sub", "d_a", d_a, a);
  check::adjoint("sub", "d_b", d_b, b);
  if (d_a != nullptr && d_a == d_b) return;  // x - x: the contributions cancel
  bool overwrite_a = false, overwrite_b = false;
  float* da = adjoint_data(d_a, &overwrite_a);  // shape of a
  float* db = adjoint_data(d_b, &overwrite_b);  // shape of b
  if (kernel_mode() == KernelMode::Reference) {
    ref::sub_backward(da, db, d_out.f32(), a.numel());
  } else {
    cpu::sub_backward(da, db, d_out.f32(), a.numel(), overwrite_a, overwrite_b);
  }
}

Tensor neg(const Tensor& x) {
  LLMCC_PROFILE("neg.fwd");
  check::defined("neg", "x", x);
  Tensor out = new_tensor(x.shape(), "neg");  // shape of x
  if (kernel_mode() == KernelMode::Reference) {
    ref::neg_forward(out.f32(), x.f32(), x.numel());
  } else {
    cpu::neg_forward(out.f32(), x.f32(), x.numel());
  }
  return out;
}

Tensor operator-(const Tensor& x) { return neg(x); }

void neg_pullback(const Tensor& x, const Tensor& out, const Tensor& d_out, Tensor* d_x) {
  LLMCC_PROFILE("neg.bwd");
  (void)out;
  check::same_shape("neg", "x", x, "d_out", d_out);
  check::adjoint("neg", "d_x", d_x, x);
  if (d_x == nullptr) return;
  bool overwrite = false;
  float* dx = adjoint_data(d_x, &overwrite);  // shape of x
  if (kernel_mode() == KernelMode::Reference) {
    ref::neg_backward(dx, d_out.f32(), x.numel());
  } else {
    cpu::neg_backward(dx, d_out.f32(), x.numel(), overwrite);
  }
}

Tensor rsub(float s, const Tensor& x) {
  LLMCC_PROFILE("rsub.fwd");
  check::defined("rsub", "x", x);
  Tensor out = new_tensor(x.shape(), "rsub");  // shape of x
  if (kernel_mode() == KernelMode::Reference) {
    ref::rsub_forward(out.f32(), s, x.f32(), x.numel());
  } else {
    cpu::rsub_forward(out.f32(), s, x.f32(), x.numel());
  }
  return out;
}

Tensor operator-(float s, const Tensor& x) { return rsub(s, x); }

void rsub_pullback(float s, const Tensor& x, const Tensor& out, const Tensor& d_out, float* d_s, Tensor* d_x) {
  LLMCC_PROFILE("rsub.bwd");
  (void)s;
  (void)out;
  check::same_shape("rsub", "x", x, "d_out", d_out);
  check::adjoint("rsub", "d_x", d_x, x);
  bool overwrite = false;
  float* dx = adjoint_data(d_x, &overwrite);  // shape of x
  if (kernel_mode() == KernelMode::Reference) {
    ref::rsub_backward(d_s, dx, d_out.f32(), x.numel());
  } else {
    cpu::rsub_backward(d_s, dx, d_out.f32(), x.numel(), overwrite);
  }
}

}  // namespace llmcc
