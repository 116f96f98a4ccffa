// add: front end, forward and pullback (the rule adgen calls for `a + b` on tensors).
#include "llmcc/ops/add.h"

#include "kernels/cpu/add.h"
#include "kernels/ref/add.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/adjoint.h"
#include "ops/broadcast.h"
#include "ops/check.h"

namespace llmcc {

Tensor add(const Tensor& a, const Tensor& b) {
  LLMCC_PROFILE("add.fwd");
  const BinaryShapes s = binary_shapes("add", a, b, /*either_side=*/true);
  Tensor out = new_tensor(binary_out_shape(s, a, b), "add");  // shape of the full operand
  if (s.broadcast) {
    broadcast_forward(cpu::BinaryKind::Add, s, a, b, out);
  } else if (kernel_mode() == KernelMode::Reference) {
    ref::add_forward(out.f32(), a.f32(), b.f32(), a.numel());
  } else {
    cpu::add_forward(out.f32(), a.f32(), b.f32(), a.numel());
  }
  return out;
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }

void add_pullback(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& d_out, Tensor* d_a, Tensor* d_b) {
  LLMCC_PROFILE("add.bwd");
  (void)out;
  const BinaryShapes s = binary_shapes("add", a, b, /*either_side=*/true);
  if (s.broadcast) return broadcast_pullback("add", cpu::BinaryKind::Add, s, a, b, d_out, d_a, d_b);
  check::same_shape("add", "a", a, "d_out", d_out);
  check::adjoint("add", "d_a", d_a, a);
  check::adjoint("add", "d_b", d_b, b);
  bool overwrite_a = false, overwrite_b = false;
  float* da = adjoint_data(d_a, &overwrite_a);  // shape of a
  float* db = adjoint_data(d_b, &overwrite_b);  // shape of b
  if (kernel_mode() == KernelMode::Reference) {
    ref::add_backward(da, db, d_out.f32(), a.numel());
  } else {
    cpu::add_backward(da, db, d_out.f32(), a.numel(), overwrite_a, overwrite_b);
  }
}

}  // namespace llmcc
