// rmsnorm: front end, forward and pullback (Llama's RMSNorm; eps is config, not differentiated).
#include "llmcc/ops/rmsnorm.h"

#include <cmath>
#include <string>

#include "kernels/cpu/rmsnorm.h"
#include "kernels/ref/rmsnorm.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/check.h"

namespace llmcc {
namespace {

constexpr const char* kOp = "rmsnorm";

struct Rows {
  std::int64_t N, C;
};
// Validates x (N, C) or (B, T, C), w (C) and eps; returns N (rows) and C.
Rows check_inputs(const Tensor& x, const Tensor& w, float eps) {
  check::defined(kOp, "x", x);
  check::that(x.ndim() == 2 || x.ndim() == 3, kOp,
              [&] { return "x has shape " + x.shape().str() + ", expected 2 dims (N, C) or 3 dims (B, T, C)"; });
  const std::int64_t C = x.dim(-1);
  check::that(C > 0, kOp, [&] { return "x has shape " + x.shape().str() + ", expected a last dim C > 0"; });
  check::ndim(kOp, "w", w, 1, "(C)");
  check::dim(kOp, "w", w, 0, C, "last dim of x");
  // eps = 0 would divide by zero on an all-zero row.
  check::that(std::isfinite(eps) && eps > 0.0f, kOp,
              [&] { return "eps is " + std::to_string(eps) + ", expected a finite value > 0 (e.g. 1e-5)"; });
  return {x.numel() / C, C};
}

Tensor forward(const Tensor& x, const Tensor& w, float eps, float* rstd, Rows r) {
  Tensor out = new_tensor(x.shape(), kOp);  // shape of x
  if (kernel_mode() == KernelMode::Reference) {
    ref::rmsnorm_forward(out.f32(), rstd, x.f32(), w.f32(), eps, r.N, r.C);
  } else {
    cpu::rmsnorm_forward(out.f32(), rstd, x.f32(), w.f32(), eps, r.N, r.C);
  }
  return out;
}

}  // namespace

Tensor rmsnorm(const Tensor& x, const Tensor& w, float eps) {
  LLMCC_PROFILE("rmsnorm.fwd");
  const Rows r = check_inputs(x, w, eps);
  return forward(x, w, eps, nullptr, r);  // nothing to save
}

Tensor rmsnorm_fwd(const Tensor& x, const Tensor& w, float eps, RmsNormSaved& saved) {
  LLMCC_PROFILE("rmsnorm.fwd");
  const Rows r = check_inputs(x, w, eps);
  saved.rstd = new_tensor({r.N}, kOp);  // (N)
  return forward(x, w, eps, saved.rstd.f32(), r);
}

void rmsnorm_pullback(const Tensor& x, const Tensor& w, float eps, const Tensor& out, const RmsNormSaved& saved,
                      const Tensor& d_out, Tensor* d_x, Tensor* d_w) {
  LLMCC_PROFILE("rmsnorm.bwd");
  (void)out;  // the backward reads x, w and the saved rstd only (eps is folded into rstd)
  const Rows r = check_inputs(x, w, eps);
  check::ndim(kOp, "saved.rstd", saved.rstd, 1, "(N)");
  check::dim(kOp, "saved.rstd", saved.rstd, 0, r.N, "rows of x");
  check::same_shape(kOp, "x", x, "d_out", d_out);
  check::adjoint(kOp, "d_x", d_x, x);
  check::adjoint(kOp, "d_w", d_w, w);
  float* dx = d_x ? d_x->f32() : nullptr;
  float* dw = d_w ? d_w->f32() : nullptr;
  if (dx == nullptr && dw == nullptr) return;
  if (kernel_mode() == KernelMode::Reference) {
    ref::rmsnorm_backward(dx, dw, d_out.f32(), x.f32(), w.f32(), saved.rstd.f32(), r.N, r.C);
  } else {
    cpu::rmsnorm_backward(dx, dw, d_out.f32(), x.f32(), w.f32(), saved.rstd.f32(), r.N, r.C);
  }
}

}  // namespace llmcc
