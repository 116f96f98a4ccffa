// mean_pool: front end, forward and pullback.
#include "llmcc/ops/mean_pool.h"

#include "kernels/cpu/mean_pool.h"
#include "kernels/ref/mean_pool.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/adjoint.h"
#include "ops/check.h"

namespace llmcc {
namespace {

constexpr const char* kOp = "mean_pool";

void check_x(const Tensor& x) {
  check::ndim(kOp, "x", x, 3, "(B, T, C)");
  check::that(x.numel() > 0, kOp, [&] { return "x has shape " + x.shape().str() + ", expected B, T, C > 0"; });
}

}  // namespace

Tensor mean_pool(const Tensor& x) {
  LLMCC_PROFILE("mean_pool.fwd");
  check_x(x);
  const std::int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
  Tensor out = new_tensor({B, C}, kOp);  // (B, C)
  if (kernel_mode() == KernelMode::Reference) {
    ref::mean_pool_forward(out.f32(), x.f32(), B, T, C);
  } else {
    cpu::mean_pool_forward(out.f32(), x.f32(), B, T, C);
  }
  return out;
}

void mean_pool_pullback(const Tensor& x, const Tensor& out, const Tensor& d_out, Tensor* d_x) {
  LLMCC_PROFILE("mean_pool.bwd");
  (void)out;
  check_x(x);
  const std::int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
  check::ndim(kOp, "d_out", d_out, 2, "(B, C)");
  check::dim(kOp, "d_out", d_out, 0, B, "B of x");
  check::dim(kOp, "d_out", d_out, 1, C, "C of x");
  check::adjoint(kOp, "d_x", d_x, x);
  if (d_x == nullptr) return;
  bool overwrite = false;
  float* dx = adjoint_data(d_x, &overwrite);  // (B, T, C)
  if (kernel_mode() == KernelMode::Reference) {
    ref::mean_pool_backward(dx, d_out.f32(), B, T, C);
  } else {
    cpu::mean_pool_backward(dx, d_out.f32(), B, T, C, overwrite);
  }
}

}  // namespace llmcc
