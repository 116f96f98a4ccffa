// rope: front end, forward and pullback (rotary position embedding, Meta-Llama convention).
#include "llmcc/ops/rope.h"

#include <cmath>
#include <string>

#include "kernels/cpu/rope.h"
#include "kernels/ref/rope.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/check.h"

namespace llmcc {
namespace {

constexpr const char* kOp = "rope";

struct Dims {
  int B, T, NH, HS;
};
// Validates x (B, T, n_head * HS) with HS even, theta and pos_offset.
Dims check_inputs(const Tensor& x, int n_head, float theta, int pos_offset) {
  check::ndim(kOp, "x", x, 3, "(B, T, C)");
  const std::int64_t C = x.dim(2);
  check::that(n_head >= 1, kOp, [&] { return "n_head is " + std::to_string(n_head) + ", expected >= 1"; });
  check::that(C % n_head == 0, kOp, [&] {
    return "x has shape " + x.shape().str() + ": C = " + std::to_string(C) +
           " is not divisible by n_head = " + std::to_string(n_head);
  });
  const std::int64_t HS = C / n_head;
  check::that(HS % 2 == 0, kOp, [&] {
    return "head size HS = C / n_head = " + std::to_string(HS) +
           " is odd, expected an even HS (rope rotates pairs x[2i], x[2i+1])";
  });
  check::that(std::isfinite(theta) && theta > 0.0f, kOp, [&] {
    return "theta is " + std::to_string(theta) + ", expected a finite value > 0 (e.g. 10000)";
  });
  check::that(pos_offset >= 0, kOp, [&] {
    return "pos_offset is " + std::to_string(pos_offset) +
           ", expected >= 0 (the number of positions already in the KV cache)";
  });
  return {static_cast<int>(x.dim(0)), static_cast<int>(x.dim(1)), n_head, static_cast<int>(HS)};
}

}  // namespace

Tensor rope(const Tensor& x, int n_head, float theta, int pos_offset) {
  LLMCC_PROFILE("rope.fwd");
  const Dims d = check_inputs(x, n_head, theta, pos_offset);
  Tensor out = new_tensor(x.shape(), kOp);  // (B, T, C)
  if (kernel_mode() == KernelMode::Reference) {
    ref::rope_forward(out.f32(), x.f32(), d.B, d.T, d.NH, d.HS, theta, pos_offset);
  } else {
    cpu::rope_forward(out.f32(), x.f32(), d.B, d.T, d.NH, d.HS, theta, pos_offset);
  }
  return out;
}

void rope_pullback(const Tensor& x, int n_head, float theta, int pos_offset, const Tensor& out,
                   const Tensor& d_out, Tensor* d_x) {
  LLMCC_PROFILE("rope.bwd");
  (void)out;  // the backward is a rotation of d_out; it reads neither x nor out
  const Dims d = check_inputs(x, n_head, theta, pos_offset);
  check::same_shape(kOp, "x", x, "d_out", d_out);
  check::adjoint(kOp, "d_x", d_x, x);
  if (d_x == nullptr) return;
  if (kernel_mode() == KernelMode::Reference) {
    ref::rope_backward(d_x->f32(), d_out.f32(), d.B, d.T, d.NH, d.HS, theta, pos_offset);
  } else {
    cpu::rope_backward(d_x->f32(), d_out.f32(), d.B, d.T, d.NH, d.HS, theta, pos_offset);
  }
}

}  // namespace llmcc
