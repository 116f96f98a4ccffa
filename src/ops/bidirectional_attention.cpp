// bidirectional_attention: front end, forward and pullback of non-causal multi-head
// self-attention.
#include "llmcc/ops/bidirectional_attention.h"

#include <string>

#include "kernels/cpu/bidirectional_attention.h"
#include "kernels/ref/bidirectional_attention.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/check.h"

namespace llmcc {
namespace {

constexpr const char* kOp = "bidirectional_attention";

struct Dims {
  int B, T, NH, HS;
};

// Validates q, k, v (B, T, n_head * HS) and n_head; returns the sizes.
Dims check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, int n_head) {
  check::that(n_head >= 1, kOp, [&] { return "n_head is " + std::to_string(n_head) + ", expected >= 1"; });
  check::ndim(kOp, "q", q, 3, "(B, T, n_head * HS)");
  const std::int64_t C = q.dim(2);
  check::that(q.dim(0) > 0 && q.dim(1) > 0 && C > 0 && C % n_head == 0, kOp, [&] {
    return "q has shape " + q.shape().str() +
           ", expected B, T > 0 and a last dim that is a positive multiple of n_head " + std::to_string(n_head);
  });
  check::same_shape(kOp, "q", q, "k", k);
  check::same_shape(kOp, "q", q, "v", v);
  return {static_cast<int>(q.dim(0)), static_cast<int>(q.dim(1)), n_head, static_cast<int>(C / n_head)};
}

Tensor forward(const Tensor& q, const Tensor& k, const Tensor& v, int n_head, BidirectionalAttentionSaved* saved) {
  const Dims d = check_inputs(q, k, v, n_head);
  Tensor out = new_tensor(q.shape(), kOp);  // (B, T, NH * HS)
  float* lse = nullptr;
  if (saved) {
    saved->lse = new_tensor({d.B, d.NH, d.T}, kOp);  // (B, NH, T)
    lse = saved->lse.f32();
  }
  if (kernel_mode() == KernelMode::Reference) {
    ref::bidirectional_attention_forward(out.f32(), lse, q.f32(), k.f32(), v.f32(), d.B, d.T, d.NH, d.HS);
  } else {
    cpu::bidirectional_attention_forward(out.f32(), lse, q.f32(), k.f32(), v.f32(), d.B, d.T, d.NH, d.HS);
  }
  return out;
}

}  // namespace

Tensor bidirectional_attention(const Tensor& q, const Tensor& k, const Tensor& v, int n_head) {
  LLMCC_PROFILE("bidirectional_attention.fwd");
  return forward(q, k, v, n_head, nullptr);
}

Tensor bidirectional_attention_fwd(const Tensor& q, const Tensor& k, const Tensor& v, int n_head,
                                   BidirectionalAttentionSaved& saved) {
  LLMCC_PROFILE("bidirectional_attention.fwd");
  return forward(q, k, v, n_head, &saved);
}

void bidirectional_attention_pullback(const Tensor& q, const Tensor& k, const Tensor& v, int n_head, const Tensor& out,
                                      const BidirectionalAttentionSaved& saved, const Tensor& d_out, Tensor* d_q,
                                      Tensor* d_k, Tensor* d_v) {
  LLMCC_PROFILE("bidirectional_attention.bwd");
  const Dims d = check_inputs(q, k, v, n_head);
  check::same_shape(kOp, "q", q, "out", out);
  check::same_shape(kOp, "q", q, "d_out", d_out);
  check::that(saved.lse.defined(), kOp, "saved.lse has no storage; did you run bidirectional_attention_fwd?");
  check::ndim(kOp, "saved.lse", saved.lse, 3, "(B, n_head, T)");
  check::dim(kOp, "saved.lse", saved.lse, 0, d.B, "B");
  check::dim(kOp, "saved.lse", saved.lse, 1, d.NH, "n_head");
  check::dim(kOp, "saved.lse", saved.lse, 2, d.T, "T");
  check::adjoint(kOp, "d_q", d_q, q);
  check::adjoint(kOp, "d_k", d_k, k);
  check::adjoint(kOp, "d_v", d_v, v);
  // The kernels accumulate (their adjoints may alias), so pending zeros are filled here.
  float* dq = d_q ? d_q->f32() : nullptr;
  float* dk = d_k ? d_k->f32() : nullptr;
  float* dv = d_v ? d_v->f32() : nullptr;
  if (kernel_mode() == KernelMode::Reference) {
    ref::bidirectional_attention_backward(dq, dk, dv, d_out.f32(), q.f32(), k.f32(), v.f32(), out.f32(),
                                          saved.lse.f32(), d.B, d.T, d.NH, d.HS);
  } else {
    cpu::bidirectional_attention_backward(dq, dk, dv, d_out.f32(), q.f32(), k.f32(), v.f32(), out.f32(),
                                          saved.lse.f32(), d.B, d.T, d.NH, d.HS);
  }
}

}  // namespace llmcc
