// lora_linear: front end, forward and pullback. out = x W^T + s (x A^T) B^T.
#include "llmcc/ops/lora_linear.h"

#include <climits>
#include <cmath>
#include <string>

#include "kernels/cpu/lora_linear.h"
#include "kernels/ref/lora_linear.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/adjoint.h"
#include "ops/check.h"
#include "ops/widened.h"

namespace llmcc {
namespace {

constexpr const char* kOp = "lora_linear";

// The sizes of one call, after validation: x viewed as (N, C), w (OC, C), a (R, C), b (OC, R).
struct Dims {
  std::int64_t N, C, OC, R;
  Shape out;  // (N, OC) or (B, T, OC)
};

Dims check_inputs(const Tensor& x, const Tensor& w, const Tensor& a, const Tensor& b, float s) {
  check::defined(kOp, "x", x);
  check::that(x.ndim() == 2 || x.ndim() == 3, kOp,
              [&] { return "x has shape " + x.shape().str() + ", expected 2 dims (N, C) or 3 dims (B, T, C)"; });
  check::weight_ndim(kOp, "w", w, 2, "(OC, C)");
  check::ndim(kOp, "a", a, 2, "(R, C)");
  check::ndim(kOp, "b", b, 2, "(OC, R)");
  const std::int64_t C = x.dim(-1), OC = w.dim(0), R = a.dim(0);
  check::that(x.numel() > 0 && OC > 0 && R > 0, kOp, [&] {
    return "x " + x.shape().str() + ", w " + w.shape().str() + " or a " + a.shape().str() +
           " is empty, expected sizes > 0";
  });
  check::dim(kOp, "w", w, 1, C, "last dim of x");
  check::dim(kOp, "a", a, 1, C, "last dim of x");
  check::dim(kOp, "b", b, 0, OC, "dim 0 of w");
  check::dim(kOp, "b", b, 1, R, "dim 0 of a (the rank)");
  check::that(std::isfinite(s), kOp, [&] { return "s is " + std::to_string(s) + ", expected a finite scale"; });
  const std::int64_t N = x.numel() / C;
  // cpu::gemm takes int sizes and strides.
  check::that(N <= INT_MAX && C <= INT_MAX && OC <= INT_MAX, kOp,
              [&] { return "x " + x.shape().str() + " and w " + w.shape().str() + " exceed the GEMM's int sizes"; });
  const Shape out = x.ndim() == 2 ? Shape{N, OC} : Shape{x.dim(0), x.dim(1), OC};
  return {N, C, OC, R, out};
}

cpu::Dropout dropout_of(const LoraDropout& d) {
  check::that(d.p >= 0.0f && d.p < 1.0f, kOp,
              [&] { return "dropout.p is " + std::to_string(d.p) + ", expected a probability in [0, 1)"; });
  return {d.p, d.seed};
}

cpu::LoraWeight weight_of(const Tensor& w) {
  if (w.dtype() == DType::BF16) return {nullptr, static_cast<const std::uint16_t*>(w.raw())};
  return {w.f32(), nullptr};
}

// The bias, when the op has one: f32, (OC).
void check_bias(const Tensor* bias, const Dims& d) {
  if (!bias) return;
  check::defined(kOp, "bias", *bias);
  check::that(bias->dtype() == DType::F32 && bias->shape() == Shape{d.OC}, kOp, [&] {
    return "bias has shape " + bias->shape().str() + ", expected " + Shape{d.OC}.str() + " f32 (dim 0 of w)";
  });
}

Tensor forward(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& a, const Tensor& b, float s,
               const LoraDropout& dropout, Tensor& xa) {
  const Dims d = check_inputs(x, w, a, b, s);
  check_bias(bias, d);
  const cpu::Dropout drop = dropout_of(dropout);
  Tensor out = new_tensor(d.out, kOp);                    // (N, OC) or (B, T, OC)
  xa = new_tensor({d.N, d.R}, kOp);                       // (N, R)
  const float* bias_data = bias ? bias->f32() : nullptr;  // (OC) or null
  if (kernel_mode() == KernelMode::Reference) {
    ref::lora_linear_forward(out.f32(), xa.f32(), x.f32(), widened(w).f32(), a.f32(), b.f32(), s, d.N, d.C, d.OC, d.R,
                             drop, bias_data);
  } else {
    cpu::lora_linear_forward(out.f32(), xa.f32(), x.f32(), weight_of(w), a.f32(), b.f32(), s, d.N, d.C, d.OC, d.R, drop,
                             bias_data);
  }
  return out;
}

void backward(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& a, const Tensor& b, float s,
              const LoraDropout& dropout, const LoraLinearSaved& saved, const Tensor& d_out, Tensor* d_x, Tensor* d_w,
              Tensor* d_bias, Tensor* d_a, Tensor* d_b) {
  const Dims d = check_inputs(x, w, a, b, s);
  check_bias(bias, d);
  const cpu::Dropout drop = dropout_of(dropout);
  check::that(saved.xa.defined() && saved.xa.shape() == Shape{d.N, d.R}, kOp, [&] {
    return "saved.xa has shape " + (saved.xa.defined() ? saved.xa.shape().str() : std::string("(undefined)")) +
           ", expected " + Shape{d.N, d.R}.str() + " (rows of x, the rank)";
  });
  check::defined(kOp, "d_out", d_out);
  check::that(d_out.shape() == d.out, kOp, [&] {
    return "d_out has shape " + d_out.shape().str() + ", expected " + d.out.str() + " (the shape of out)";
  });
  check::adjoint(kOp, "d_x", d_x, x);
  check::no_adjoint_of_bf16(kOp, "w", d_w, w);
  check::adjoint(kOp, "d_w", d_w, w);
  if (bias) check::adjoint(kOp, "d_bias", d_bias, *bias);
  check::adjoint(kOp, "d_a", d_a, a);
  check::adjoint(kOp, "d_b", d_b, b);
  float* dbias = d_bias ? d_bias->f32() : nullptr;  // (OC)
  if (kernel_mode() == KernelMode::Reference) {
    ref::lora_linear_backward(d_x ? d_x->f32() : nullptr, d_w ? d_w->f32() : nullptr, d_a ? d_a->f32() : nullptr,
                              d_b ? d_b->f32() : nullptr, d_out.f32(), x.f32(), widened(w).f32(), a.f32(), b.f32(),
                              saved.xa.f32(), s, d.N, d.C, d.OC, d.R, drop, dbias);
    return;
  }
  // G = d_out B (N, R), in the current arena, when an adjoint reads it.
  Tensor g = d_x || d_a ? new_tensor({d.N, d.R}, kOp) : Tensor();
  bool overwrite_dx = false;
  float* dx = adjoint_data(d_x, &overwrite_dx);  // like x
  cpu::lora_linear_backward(dx, d_w ? d_w->f32() : nullptr, d_a ? d_a->f32() : nullptr, d_b ? d_b->f32() : nullptr,
                            g.defined() ? g.f32() : nullptr, d_out.f32(), x.f32(), weight_of(w), a.f32(), b.f32(),
                            saved.xa.f32(), s, d.N, d.C, d.OC, d.R, overwrite_dx, drop, dbias);
}

}  // namespace

Tensor lora_linear(const Tensor& x, const Tensor& w, const Tensor& a, const Tensor& b, float s) {
  return lora_linear(x, w, a, b, s, LoraDropout{});
}

Tensor lora_linear_fwd(const Tensor& x, const Tensor& w, const Tensor& a, const Tensor& b, float s,
                       LoraLinearSaved& saved) {
  return lora_linear_fwd(x, w, a, b, s, LoraDropout{}, saved);
}

Tensor lora_linear(const Tensor& x, const Tensor& w, const Tensor& a, const Tensor& b, float s,
                   const LoraDropout& dropout) {
  LLMCC_PROFILE("lora_linear.fwd");
  Tensor xa;  // (N, R), dropped with the arena: nothing reads it
  return forward(x, w, nullptr, a, b, s, dropout, xa);
}

Tensor lora_linear_fwd(const Tensor& x, const Tensor& w, const Tensor& a, const Tensor& b, float s,
                       const LoraDropout& dropout, LoraLinearSaved& saved) {
  LLMCC_PROFILE("lora_linear.fwd");
  return forward(x, w, nullptr, a, b, s, dropout, saved.xa);
}

Tensor lora_linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& a, const Tensor& b, float s,
                   const LoraDropout& dropout) {
  LLMCC_PROFILE("lora_linear.fwd");
  Tensor xa;  // (N, R), dropped with the arena: nothing reads it
  return forward(x, w, &bias, a, b, s, dropout, xa);
}

Tensor lora_linear_fwd(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& a, const Tensor& b, float s,
                       const LoraDropout& dropout, LoraLinearSaved& saved) {
  LLMCC_PROFILE("lora_linear.fwd");
  return forward(x, w, &bias, a, b, s, dropout, saved.xa);
}

void lora_linear_pullback(const Tensor& x, const Tensor& w, const Tensor& a, const Tensor& b, float s,
                          const Tensor& out, const LoraLinearSaved& saved, const Tensor& d_out, Tensor* d_x,
                          Tensor* d_w, Tensor* d_a, Tensor* d_b) {
  lora_linear_pullback(x, w, a, b, s, LoraDropout{}, out, saved, d_out, d_x, d_w, d_a, d_b);
}

void lora_linear_pullback(const Tensor& x, const Tensor& w, const Tensor& a, const Tensor& b, float s,
                          const LoraDropout& dropout, const Tensor& out, const LoraLinearSaved& saved,
                          const Tensor& d_out, Tensor* d_x, Tensor* d_w, Tensor* d_a, Tensor* d_b) {
  LLMCC_PROFILE("lora_linear.bwd");
  (void)out;  // the adjoints need the inputs and x A^T only
  backward(x, w, nullptr, a, b, s, dropout, saved, d_out, d_x, d_w, nullptr, d_a, d_b);
}

void lora_linear_pullback(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& a, const Tensor& b,
                          float s, const LoraDropout& dropout, const Tensor& out, const LoraLinearSaved& saved,
                          const Tensor& d_out, Tensor* d_x, Tensor* d_w, Tensor* d_bias, Tensor* d_a, Tensor* d_b) {
  LLMCC_PROFILE("lora_linear.bwd");
  (void)out;  // the adjoints need the inputs and x A^T only
  backward(x, w, &bias, a, b, s, dropout, saved, d_out, d_x, d_w, d_bias, d_a, d_b);
}

}  // namespace llmcc
