// layernorm: front end, forward and pullback (GPT-2's LayerNorm, eps 1e-5).
#include "llmcc/ops/layernorm.h"

#include <string>

#include "kernels/cpu/layernorm.h"
#include "kernels/ref/layernorm.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/adjoint.h"
#include "ops/check.h"

namespace llmcc {
namespace {

constexpr const char* kOp = "layernorm";

// Validates x (N, C) or (B, T, C) and w, b (C); returns N (rows) and C.
struct Rows {
  std::int64_t N, C;
};
Rows check_inputs(const Tensor& x, const Tensor& w, const Tensor& b) {
  check::defined(kOp, "x", x);
  check::that(x.ndim() == 2 || x.ndim() == 3, kOp,
              [&] { return "x has shape " + x.shape().str() + ", expected 2 dims (N, C) or 3 dims (B, T, C)"; });
  const std::int64_t C = x.dim(-1);
  check::that(C > 0, kOp, [&] { return "x has shape " + x.shape().str() + ", expected a last dim C > 0"; });
  check::ndim(kOp, "w", w, 1, "(C)");
  check::dim(kOp, "w", w, 0, C, "last dim of x");
  check::ndim(kOp, "b", b, 1, "(C)");
  check::dim(kOp, "b", b, 0, C, "last dim of x");
  return {x.numel() / C, C};
}

void check_saved(const LayerNormSaved& saved, std::int64_t N) {
  check::ndim(kOp, "saved.mean", saved.mean, 1, "(N)");
  check::dim(kOp, "saved.mean", saved.mean, 0, N, "rows of x");
  check::ndim(kOp, "saved.rstd", saved.rstd, 1, "(N)");
  check::dim(kOp, "saved.rstd", saved.rstd, 0, N, "rows of x");
}

Tensor forward(const Tensor& x, const Tensor& w, const Tensor& b, float* mean, float* rstd, Rows r) {
  Tensor out = new_tensor(x.shape(), kOp);  // shape of x
  if (kernel_mode() == KernelMode::Reference) {
    ref::layernorm_forward(out.f32(), mean, rstd, x.f32(), w.f32(), b.f32(), r.N, r.C);
  } else {
    cpu::layernorm_forward(out.f32(), mean, rstd, x.f32(), w.f32(), b.f32(), r.N, r.C);
  }
  return out;
}

}  // namespace

Tensor layernorm(const Tensor& x, const Tensor& w, const Tensor& b) {
  LLMCC_PROFILE("layernorm.fwd");
  const Rows r = check_inputs(x, w, b);
  return forward(x, w, b, nullptr, nullptr, r);  // nothing to save
}

Tensor layernorm_fwd(const Tensor& x, const Tensor& w, const Tensor& b, LayerNormSaved& saved) {
  LLMCC_PROFILE("layernorm.fwd");
  const Rows r = check_inputs(x, w, b);
  saved.mean = new_tensor({r.N}, kOp);  // (N)
  saved.rstd = new_tensor({r.N}, kOp);  // (N)
  return forward(x, w, b, saved.mean.f32(), saved.rstd.f32(), r);
}

void layernorm_pullback(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& out,
                        const LayerNormSaved& saved, const Tensor& d_out, Tensor* d_x, Tensor* d_w, Tensor* d_b) {
  LLMCC_PROFILE("layernorm.bwd");
  (void)out;  // the backward reads x, w and the saved statistics only
  const Rows r = check_inputs(x, w, b);
  check_saved(saved, r.N);
  check::same_shape(kOp, "x", x, "d_out", d_out);
  check::adjoint(kOp, "d_x", d_x, x);
  check::adjoint(kOp, "d_w", d_w, w);
  check::adjoint(kOp, "d_b", d_b, b);
  bool overwrite_dx = false;
  float* dx = adjoint_data(d_x, &overwrite_dx);  // shape of x
  float* dw = d_w ? d_w->f32() : nullptr;
  float* db = d_b ? d_b->f32() : nullptr;
  if (dx == nullptr && dw == nullptr && db == nullptr) return;
  if (kernel_mode() == KernelMode::Reference) {
    ref::layernorm_backward(dx, dw, db, d_out.f32(), x.f32(), w.f32(), saved.mean.f32(), saved.rstd.f32(), r.N, r.C);
  } else {
    cpu::layernorm_backward(dx, dw, db, d_out.f32(), x.f32(), w.f32(), saved.mean.f32(), saved.rstd.f32(), r.N, r.C,
                            overwrite_dx);
  }
}

}  // namespace llmcc
