// linear and linear_nobias: front ends, forward and pullbacks. out = x @ w^T (+ b), w (OC, C).
#include "llmcc/ops/linear.h"

#include <climits>
#include <string>

#include "kernels/cpu/linear.h"
#include "kernels/ref/linear.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/adjoint.h"
#include "ops/check.h"
#include "ops/widened.h"

namespace llmcc {
namespace {

// The sizes of one call, after validation: x viewed as (N, C), w (OC, C).
struct Dims {
  std::int64_t N, C, OC;
  Shape out;  // (N, OC) or (B, T, OC)
};

// Validates x, w and (when given) b, and returns the sizes and the output shape.
Dims check_inputs(const char* op, const Tensor& x, const Tensor& w, const Tensor* b) {
  check::defined(op, "x", x);
  check::that(x.ndim() == 2 || x.ndim() == 3, op,
              [&] { return "x has shape " + x.shape().str() + ", expected 2 dims (N, C) or 3 dims (B, T, C)"; });
  check::weight_ndim(op, "w", w, 2, "(OC, C)");
  const std::int64_t C = x.dim(-1), OC = w.dim(0);
  check::that(x.numel() > 0 && OC > 0, op,
              [&] { return "x " + x.shape().str() + " or w " + w.shape().str() + " is empty, expected sizes > 0"; });
  check::dim(op, "w", w, 1, C, "last dim of x");
  if (b) {
    check::ndim(op, "b", *b, 1, "(OC)");
    check::dim(op, "b", *b, 0, OC, "dim 0 of w");
  }
  const std::int64_t N = x.numel() / C;
  // cpu::gemm takes int sizes and strides.
  check::that(N <= INT_MAX && C <= INT_MAX && OC <= INT_MAX, op,
              [&] { return "x " + x.shape().str() + " and w " + w.shape().str() + " exceed the GEMM's int sizes"; });
  const Shape out = x.ndim() == 2 ? Shape{N, OC} : Shape{x.dim(0), x.dim(1), OC};
  return {N, C, OC, out};
}

// Validates d_out against the output shape and the adjoints against their primals.
void check_adjoints(const char* op, const Dims& d, const Tensor& d_out, const Tensor& x, const Tensor& w,
                    const Tensor* b, const Tensor* d_x, const Tensor* d_w, const Tensor* d_b) {
  check::defined(op, "d_out", d_out);
  check::that(d_out.shape() == d.out, op, [&] {
    return "d_out has shape " + d_out.shape().str() + ", expected " + d.out.str() + " (the shape of out)";
  });
  check::adjoint(op, "d_x", d_x, x);
  check::no_adjoint_of_bf16(op, "w", d_w, w);
  check::adjoint(op, "d_w", d_w, w);
  if (b) check::adjoint(op, "d_b", d_b, *b);
}

Tensor forward(const char* op, const Tensor& x, const Tensor& w, const Tensor* b) {
  const Dims d = check_inputs(op, x, w, b);
  Tensor out = new_tensor(d.out, op);  // (N, OC) or (B, T, OC)
  const float* bias = b ? b->f32() : nullptr;
  if (kernel_mode() == KernelMode::Reference) {
    ref::linear_forward(out.f32(), x.f32(), widened(w).f32(), bias, d.N, d.C, d.OC);
  } else if (w.dtype() == DType::BF16) {
    cpu::linear_forward_bf16w(out.f32(), x.f32(), static_cast<const std::uint16_t*>(w.raw()), bias, d.N, d.C, d.OC);
  } else {
    cpu::linear_forward(out.f32(), x.f32(), w.f32(), bias, d.N, d.C, d.OC);
  }
  return out;
}

void backward(const char* op, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor& d_out, Tensor* d_x,
              Tensor* d_w, Tensor* d_b) {
  const Dims d = check_inputs(op, x, w, b);
  check_adjoints(op, d, d_out, x, w, b, d_x, d_w, d_b);
  bool overwrite_dx = false;
  float* dx = adjoint_data(d_x, &overwrite_dx);  // like x
  float* dw = d_w ? d_w->f32() : nullptr;        // (OC, C)
  float* db = d_b ? d_b->f32() : nullptr;        // (OC)
  if (kernel_mode() == KernelMode::Reference) {
    ref::linear_backward(dx, dw, db, d_out.f32(), x.f32(), widened(w).f32(), d.N, d.C, d.OC);
  } else if (w.dtype() == DType::BF16) {
    if (dx)
      cpu::linear_backward_bf16w(dx, d_out.f32(), static_cast<const std::uint16_t*>(w.raw()), d.N, d.C, d.OC,
                                 overwrite_dx);
    if (db) cpu::linear_backward(nullptr, nullptr, db, d_out.f32(), x.f32(), nullptr, d.N, d.C, d.OC);
  } else {
    cpu::linear_backward(dx, dw, db, d_out.f32(), x.f32(), w.f32(), d.N, d.C, d.OC, overwrite_dx);
  }
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  LLMCC_PROFILE("linear.fwd");
  return forward("linear", x, w, &b);
}

void linear_pullback(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& out, const Tensor& d_out,
                     Tensor* d_x, Tensor* d_w, Tensor* d_b) {
  LLMCC_PROFILE("linear.bwd");
  (void)out;  // the adjoints need only the inputs
  backward("linear", x, w, &b, d_out, d_x, d_w, d_b);
}

Tensor linear_nobias(const Tensor& x, const Tensor& w) {
  LLMCC_PROFILE("linear_nobias.fwd");
  return forward("linear_nobias", x, w, nullptr);
}

void linear_nobias_pullback(const Tensor& x, const Tensor& w, const Tensor& out, const Tensor& d_out, Tensor* d_x,
                            Tensor* d_w) {
  LLMCC_PROFILE("linear_nobias.bwd");
  (void)out;
  backward("linear_nobias", x, w, nullptr, d_out, d_x, d_w, nullptr);
}

}  // namespace llmcc
