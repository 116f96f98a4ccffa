// row_mean: front end, forward and pullback.
#include "llmcc/ops/row_mean.h"

#include "kernels/cpu/row_mean.h"
#include "kernels/ref/row_mean.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/adjoint.h"
#include "ops/check.h"

namespace llmcc {
namespace {

constexpr const char* kOp = "row_mean";

// x's shape with its last axis 1.
Shape column_of(const Shape& s) {
  switch (s.ndim()) {
    case 1:
      return Shape{1};
    case 2:
      return Shape{s[0], 1};
    case 3:
      return Shape{s[0], s[1], 1};
    default:
      return Shape{s[0], s[1], s[2], 1};
  }
}

void check_x(const Tensor& x) {
  check::defined(kOp, "x", x);
  check::that(x.ndim() >= 1 && x.numel() > 0, kOp,
              [&] { return "x has shape " + x.shape().str() + ", expected (..., C) with every dim > 0"; });
}

}  // namespace

Tensor row_mean(const Tensor& x) {
  LLMCC_PROFILE("row_mean.fwd");
  check_x(x);
  const std::int64_t C = x.dim(-1), R = x.numel() / C;
  Tensor out = new_tensor(column_of(x.shape()), kOp);  // (..., 1)
  if (kernel_mode() == KernelMode::Reference) {
    ref::row_mean_forward(out.f32(), x.f32(), R, C);
  } else {
    cpu::row_mean_forward(out.f32(), x.f32(), R, C);
  }
  return out;
}

void row_mean_pullback(const Tensor& x, const Tensor& out, const Tensor& d_out, Tensor* d_x) {
  LLMCC_PROFILE("row_mean.bwd");
  (void)out;
  check_x(x);
  check::defined(kOp, "d_out", d_out);
  check::that(d_out.shape() == column_of(x.shape()), kOp, [&] {
    return "d_out has shape " + d_out.shape().str() + ", expected " + column_of(x.shape()).str() + " (x's rows)";
  });
  check::adjoint(kOp, "d_x", d_x, x);
  if (d_x == nullptr) return;
  const std::int64_t C = x.dim(-1), R = x.numel() / C;
  bool overwrite = false;
  float* dx = adjoint_data(d_x, &overwrite);  // (..., C)
  if (kernel_mode() == KernelMode::Reference) {
    ref::row_mean_backward(dx, d_out.f32(), R, C);
  } else {
    cpu::row_mean_backward(dx, d_out.f32(), R, C, overwrite);
  }
}

}  // namespace llmcc
