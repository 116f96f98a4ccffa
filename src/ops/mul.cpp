// mul: front end, forward and pullback (the rule adgen calls for `a * b` on two tensors).
#include "llmcc/ops/mul.h"

#include "kernels/cpu/mul.h"
#include "kernels/ref/mul.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/broadcast.h"
#include "ops/check.h"

namespace llmcc {

Tensor mul(const Tensor& a, const Tensor& b) {
  LLMCC_PROFILE("mul.fwd");
  const BinaryShapes s = binary_shapes("mul", a, b, /*either_side=*/true);
  Tensor out = new_tensor(binary_out_shape(s, a, b), "mul");  // shape of the full operand
  if (s.broadcast) {
    broadcast_forward(cpu::BinaryKind::Mul, s, a, b, out);
  } else if (kernel_mode() == KernelMode::Reference) {
    ref::mul_forward(out.f32(), a.f32(), b.f32(), a.numel());
  } else {
    cpu::mul_forward(out.f32(), a.f32(), b.f32(), a.numel());
  }
  return out;
}

Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }

void mul_pullback(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& d_out, Tensor* d_a, Tensor* d_b) {
  LLMCC_PROFILE("mul.bwd");
  (void)out;  // the product rule needs only the inputs
  const BinaryShapes s = binary_shapes("mul", a, b, /*either_side=*/true);
  if (s.broadcast) return broadcast_pullback("mul", cpu::BinaryKind::Mul, s, a, b, d_out, d_a, d_b);
  check::same_shape("mul", "a", a, "d_out", d_out);
  check::adjoint("mul", "d_a", d_a, a);
  check::adjoint("mul", "d_b", d_b, b);
  float* da = d_a ? d_a->f32() : nullptr;
  float* db = d_b ? d_b->f32() : nullptr;
  if (kernel_mode() == KernelMode::Reference) {
    ref::mul_backward(da, db, a.f32(), b.f32(), d_out.f32(), a.numel());
  } else {
    cpu::mul_backward(da, db, a.f32(), b.f32(), d_out.f32(), a.numel());
  }
}

}  // namespace llmcc
