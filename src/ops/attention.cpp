// attention: front end, forward and pullback of fused causal grouped-query self-attention.
#include "llmcc/ops/attention.h"

#include <string>

#include "kernels/cpu/attention.h"
#include "kernels/ref/attention.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/check.h"

namespace llmcc {
namespace {

constexpr const char* kOp = "attention";

struct Dims {
  int B, T, NH, NKV, HS;
};

// Validates q (B, T, NH*HS), k and v (B, T, NKV*HS) and the head counts; returns the sizes.
Dims check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, int n_head, int n_kv_head) {
  check::that(n_head >= 1 && n_kv_head >= 1, kOp, [&] {
    return "n_head " + std::to_string(n_head) + " and n_kv_head " + std::to_string(n_kv_head) +
           ", expected both >= 1";
  });
  check::that(n_head % n_kv_head == 0, kOp, [&] {
    return "n_head " + std::to_string(n_head) + " is not a multiple of n_kv_head " +
           std::to_string(n_kv_head) + ", expected n_kv_head to divide n_head";
  });
  check::ndim(kOp, "q", q, 3, "(B, T, n_head * HS)");
  check::ndim(kOp, "k", k, 3, "(B, T, n_kv_head * HS)");
  const std::int64_t C = q.dim(2);
  check::that(C > 0 && C % n_head == 0, kOp, [&] {
    return "q has shape " + q.shape().str() + ": last dim " + std::to_string(C) +
           ", expected a positive multiple of n_head " + std::to_string(n_head);
  });
  const std::int64_t HS = C / n_head;
  check::dim(kOp, "k", k, 0, q.dim(0), "B of q");
  check::dim(kOp, "k", k, 1, q.dim(1), "T of q");
  check::dim(kOp, "k", k, 2, n_kv_head * HS, [&] {
    return "n_kv_head " + std::to_string(n_kv_head) + " * head size " + std::to_string(HS);
  });
  check::same_shape(kOp, "k", k, "v", v);
  return {static_cast<int>(q.dim(0)), static_cast<int>(q.dim(1)), n_head, n_kv_head,
          static_cast<int>(HS)};
}

Tensor forward(const Tensor& q, const Tensor& k, const Tensor& v, int n_head, int n_kv_head,
               AttentionSaved* saved) {
  const Dims s = check_inputs(q, k, v, n_head, n_kv_head);
  Tensor out = new_tensor(q.shape(), kOp);  // (B, T, NH * HS)
  float* lse = nullptr;
  if (saved) {
    saved->lse = new_tensor({s.B, s.NH, s.T}, kOp);  // (B, NH, T)
    lse = saved->lse.f32();
  }
  if (kernel_mode() == KernelMode::Reference) {
    ref::attention_forward(out.f32(), lse, q.f32(), k.f32(), v.f32(), s.B, s.T, s.NH, s.NKV, s.HS);
  } else {
    cpu::attention_forward(out.f32(), lse, q.f32(), k.f32(), v.f32(), s.B, s.T, s.NH, s.NKV, s.HS);
  }
  return out;
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int n_head, int n_kv_head) {
  LLMCC_PROFILE("attention.fwd");
  return forward(q, k, v, n_head, n_kv_head, nullptr);
}

Tensor attention_fwd(const Tensor& q, const Tensor& k, const Tensor& v, int n_head, int n_kv_head,
                     AttentionSaved& saved) {
  LLMCC_PROFILE("attention.fwd");
  return forward(q, k, v, n_head, n_kv_head, &saved);
}

void attention_pullback(const Tensor& q, const Tensor& k, const Tensor& v, int n_head,
                        int n_kv_head, const Tensor& out, const AttentionSaved& saved,
                        const Tensor& d_out, Tensor* d_q, Tensor* d_k, Tensor* d_v) {
  LLMCC_PROFILE("attention.bwd");
  const Dims s = check_inputs(q, k, v, n_head, n_kv_head);
  check::same_shape(kOp, "q", q, "out", out);
  check::same_shape(kOp, "q", q, "d_out", d_out);
  check::ndim(kOp, "saved.lse", saved.lse, 3, "(B, n_head, T); did you run attention_fwd?");
  check::dim(kOp, "saved.lse", saved.lse, 0, s.B, "B of q");
  check::dim(kOp, "saved.lse", saved.lse, 1, s.NH, "n_head");
  check::dim(kOp, "saved.lse", saved.lse, 2, s.T, "T of q");
  check::adjoint(kOp, "d_q", d_q, q);
  check::adjoint(kOp, "d_k", d_k, k);
  check::adjoint(kOp, "d_v", d_v, v);
  float* dq = d_q ? d_q->f32() : nullptr;
  float* dk = d_k ? d_k->f32() : nullptr;
  float* dv = d_v ? d_v->f32() : nullptr;
  if (kernel_mode() == KernelMode::Reference) {
    ref::attention_backward(dq, dk, dv, d_out.f32(), q.f32(), k.f32(), v.f32(), out.f32(),
                            saved.lse.f32(), s.B, s.T, s.NH, s.NKV, s.HS);
  } else {
    cpu::attention_backward(dq, dk, dv, d_out.f32(), q.f32(), k.f32(), v.f32(), out.f32(),
                            saved.lse.f32(), s.B, s.T, s.NH, s.NKV, s.HS);
  }
}

}  // namespace llmcc
