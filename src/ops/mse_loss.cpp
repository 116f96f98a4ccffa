// mse_loss: front end, forward and pullback.
#include "llmcc/ops/mse_loss.h"

#include "kernels/cpu/mse_loss.h"
#include "kernels/ref/mse_loss.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/adjoint.h"
#include "ops/check.h"

namespace llmcc {
namespace {

constexpr const char* kOp = "mse_loss";

void check_inputs(const Tensor& pred, const Tensor& target) {
  check::same_shape(kOp, "pred", pred, "target", target);
  check::that(pred.numel() > 0, kOp, [&] { return "pred has shape " + pred.shape().str() + ", expected elements"; });
}

}  // namespace

float mse_loss(const Tensor& pred, const Tensor& target) {
  LLMCC_PROFILE("mse_loss.fwd");
  check_inputs(pred, target);
  if (kernel_mode() == KernelMode::Reference) return ref::mse_loss_forward(pred.f32(), target.f32(), pred.numel());
  return cpu::mse_loss_forward(pred.f32(), target.f32(), pred.numel());
}

void mse_loss_pullback(const Tensor& pred, const Tensor& target, float out, float d_out, Tensor* d_pred,
                       Tensor* d_target) {
  LLMCC_PROFILE("mse_loss.bwd");
  (void)out;
  check_inputs(pred, target);
  check::adjoint(kOp, "d_pred", d_pred, pred);
  check::adjoint(kOp, "d_target", d_target, target);
  // The same tensor for both adjoints (mse_loss(x, x)) gets both contributions: the first
  // adjoint_data takes its pending zeros, and the kernel writes d_pred before it adds d_target.
  bool overwrite_pred = false, overwrite_target = false;
  float* dp = adjoint_data(d_pred, &overwrite_pred);      // shape of pred
  float* dt = adjoint_data(d_target, &overwrite_target);  // shape of pred
  if (kernel_mode() == KernelMode::Reference) {
    ref::mse_loss_backward(dp, dt, pred.f32(), target.f32(), d_out, pred.numel());
  } else {
    cpu::mse_loss_backward(dp, dt, pred.f32(), target.f32(), d_out, pred.numel(), overwrite_pred, overwrite_target);
  }
}

float mse_loss_tangent(const Tensor& pred, const Tensor& target, const Tensor& tp, const Tensor& tt) {
  LLMCC_PROFILE("mse_loss_tangent.fwd");
  check_inputs(pred, target);
  check::same_shape("mse_loss_tangent", "pred", pred, "tp", tp);
  check::same_shape("mse_loss_tangent", "pred", pred, "tt", tt);
  if (kernel_mode() == KernelMode::Reference)
    return ref::mse_loss_tangent_forward(pred.f32(), target.f32(), tp.f32(), tt.f32(), pred.numel());
  return cpu::mse_loss_tangent_forward(pred.f32(), target.f32(), tp.f32(), tt.f32(), pred.numel());
}

void mse_loss_tangent_pullback(const Tensor& pred, const Tensor& target, const Tensor& tp, const Tensor& tt, float out,
                               float d_out, Tensor* d_pred, Tensor* d_target, Tensor* d_tp, Tensor* d_tt) {
  LLMCC_PROFILE("mse_loss_tangent.bwd");
  (void)out;
  check_inputs(pred, target);
  check::same_shape("mse_loss_tangent", "pred", pred, "tp", tp);
  check::same_shape("mse_loss_tangent", "pred", pred, "tt", tt);
  check::adjoint("mse_loss_tangent", "d_pred", d_pred, pred);
  check::adjoint("mse_loss_tangent", "d_target", d_target, target);
  check::adjoint("mse_loss_tangent", "d_tp", d_tp, tp);
  check::adjoint("mse_loss_tangent", "d_tt", d_tt, tt);
  auto data = [](Tensor* d) { return d ? d->f32() : nullptr; };  // pending zeros filled on first access
  float* dp = data(d_pred);
  float* dt = data(d_target);
  float* dtp = data(d_tp);
  float* dtt = data(d_tt);
  if (kernel_mode() == KernelMode::Reference) {
    ref::mse_loss_tangent_backward(dp, dt, dtp, dtt, pred.f32(), target.f32(), tp.f32(), tt.f32(), d_out, pred.numel());
  } else {
    cpu::mse_loss_tangent_backward(dp, dt, dtp, dtt, pred.f32(), target.f32(), tp.f32(), tt.f32(), d_out, pred.numel());
  }
}

}  // namespace llmcc
