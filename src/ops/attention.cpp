// attention: front ends, forward and pullback of fused causal grouped-query self-attention, on
// separate q, k, v (attention) or on one packed qkv tensor (attention_qkv). Both run the same
// kernels; the packed form passes row strides instead of copying q, k, v apart.
#include "llmcc/ops/attention.h"

#include <string>

#include "kernels/attention_layout.h"
#include "kernels/cpu/attention_tangent.h"
#include "kernels/ref/attention_tangent.h"
#include "kernels/cpu/attention.h"
#include "kernels/ref/attention.h"
#include "llmcc/arena.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "ops/adjoint.h"
#include "ops/check.h"

namespace llmcc {
namespace {

constexpr const char* kOp = "attention";
constexpr const char* kOpQkv = "attention_qkv";

void check_head_counts(const char* op, int n_head, int n_kv_head) {
  check::that(n_head >= 1 && n_kv_head >= 1, op, [&] {
    return "n_head " + std::to_string(n_head) + " and n_kv_head " + std::to_string(n_kv_head) + ", expected both >= 1";
  });
  check::that(n_head % n_kv_head == 0, op, [&] {
    return "n_head " + std::to_string(n_head) + " is not a multiple of n_kv_head " + std::to_string(n_kv_head) +
           ", expected n_kv_head to divide n_head";
  });
}

// Validates q (B, T, NH*HS), k and v (B, T, NKV*HS) and the head counts; returns the layout.
AttentionLayout check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, int n_head, int n_kv_head) {
  check_head_counts(kOp, n_head, n_kv_head);
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
  check::dim(kOp, "k", k, 2, n_kv_head * HS,
             [&] { return "n_kv_head " + std::to_string(n_kv_head) + " * head size " + std::to_string(HS); });
  check::same_shape(kOp, "k", k, "v", v);
  return AttentionLayout::dense(static_cast<int>(q.dim(0)), static_cast<int>(q.dim(1)), n_head, n_kv_head,
                                static_cast<int>(HS));
}

// Validates qkv (B, T, (NH + 2*NKV) * HS) and the head counts; returns the packed layout.
AttentionLayout check_packed(const Tensor& qkv, int n_head, int n_kv_head) {
  check_head_counts(kOpQkv, n_head, n_kv_head);
  check::ndim(kOpQkv, "qkv", qkv, 3, "(B, T, (n_head + 2 * n_kv_head) * HS)");
  const std::int64_t W = qkv.dim(2), heads = std::int64_t{n_head} + 2 * std::int64_t{n_kv_head};
  check::that(W > 0 && W % heads == 0, kOpQkv, [&] {
    return "qkv has shape " + qkv.shape().str() + ": last dim " + std::to_string(W) +
           ", expected a positive multiple of n_head + 2 * n_kv_head = " + std::to_string(heads) +
           " (query, key and value heads of size HS)";
  });
  return AttentionLayout::packed(static_cast<int>(qkv.dim(0)), static_cast<int>(qkv.dim(1)), n_head, n_kv_head,
                                 static_cast<int>(W / heads));
}

// Attention's products follow the matrix products' dtype (runtime.h).
cpu::AttentionProducts products() {
  return matmul_dtype() == MatmulDtype::Bf16 ? cpu::AttentionProducts::Bf16 : cpu::AttentionProducts::Fp32;
}

// The output (B, T, NH*HS) and, when `saved`, the lse (B, NH, T) of either form.
Tensor forward(const char* op, const AttentionLayout& L, const float* q, const float* k, const float* v,
               AttentionSaved* saved) {
  Tensor out = new_tensor({L.B, L.T, std::int64_t{L.NH} * L.HS}, op);  // (B, T, NH * HS)
  float* lse = nullptr;
  if (saved) {
    saved->lse = new_tensor({L.B, L.NH, L.T}, op);  // (B, NH, T)
    lse = saved->lse.f32();
  }
  if (kernel_mode() == KernelMode::Reference) {
    ref::attention_forward(out.f32(), lse, q, k, v, L);
  } else {
    cpu::attention_forward(out.f32(), lse, q, k, v, L, products());
  }
  return out;
}

// Checks what both pullbacks read besides their inputs: out and d_out (B, T, NH*HS) and saved.lse.
void check_saved(const char* op, const AttentionLayout& L, const Tensor& out, const AttentionSaved& saved,
                 const Tensor& d_out) {
  const std::int64_t C = std::int64_t{L.NH} * L.HS;
  check::ndim(op, "out", out, 3, "(B, T, n_head * HS)");
  check::dim(op, "out", out, 0, L.B, "B");
  check::dim(op, "out", out, 1, L.T, "T");
  check::dim(op, "out", out, 2, C, "n_head * HS");
  check::same_shape(op, "out", out, "d_out", d_out);
  check::ndim(
      op, "saved.lse", saved.lse, 3,
      op == kOp ? "(B, n_head, T); did you run attention_fwd?" : "(B, n_head, T); did you run attention_qkv_fwd?");
  check::dim(op, "saved.lse", saved.lse, 0, L.B, "B");
  check::dim(op, "saved.lse", saved.lse, 1, L.NH, "n_head");
  check::dim(op, "saved.lse", saved.lse, 2, L.T, "T");
}

// overwrite_*: the adjoint's zeros are pending (ops/adjoint.h); only fast kernels get them.
void backward(const AttentionLayout& L, const float* q, const float* k, const float* v, const Tensor& out,
              const AttentionSaved& saved, const Tensor& d_out, float* dq, float* dk, float* dv, bool overwrite_q,
              bool overwrite_k, bool overwrite_v) {
  if (kernel_mode() == KernelMode::Reference) {
    ref::attention_backward(dq, dk, dv, d_out.f32(), q, k, v, out.f32(), saved.lse.f32(), L);
  } else {
    cpu::attention_backward(dq, dk, dv, d_out.f32(), q, k, v, out.f32(), saved.lse.f32(), L, overwrite_q, overwrite_k,
                            overwrite_v, products());
  }
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int n_head, int n_kv_head) {
  LLMCC_PROFILE("attention.fwd");
  const AttentionLayout L = check_inputs(q, k, v, n_head, n_kv_head);
  return forward(kOp, L, q.f32(), k.f32(), v.f32(), nullptr);
}

Tensor attention_fwd(const Tensor& q, const Tensor& k, const Tensor& v, int n_head, int n_kv_head,
                     AttentionSaved& saved) {
  LLMCC_PROFILE("attention.fwd");
  const AttentionLayout L = check_inputs(q, k, v, n_head, n_kv_head);
  return forward(kOp, L, q.f32(), k.f32(), v.f32(), &saved);
}

void attention_pullback(const Tensor& q, const Tensor& k, const Tensor& v, int n_head, int n_kv_head, const Tensor& out,
                        const AttentionSaved& saved, const Tensor& d_out, Tensor* d_q, Tensor* d_k, Tensor* d_v) {
  LLMCC_PROFILE("attention.bwd");
  const AttentionLayout L = check_inputs(q, k, v, n_head, n_kv_head);
  check::same_shape(kOp, "q", q, "out", out);
  check_saved(kOp, L, out, saved, d_out);
  check::adjoint(kOp, "d_q", d_q, q);
  check::adjoint(kOp, "d_k", d_k, k);
  check::adjoint(kOp, "d_v", d_v, v);
  if (!d_q && !d_k && !d_v) return;
  bool overwrite_q = false, overwrite_k = false, overwrite_v = false;
  float* dq = adjoint_data(d_q, &overwrite_q);  // (B, T, NH*HS)
  float* dk = adjoint_data(d_k, &overwrite_k);  // (B, T, NKV*HS)
  float* dv = adjoint_data(d_v, &overwrite_v);  // (B, T, NKV*HS)
  backward(L, q.f32(), k.f32(), v.f32(), out, saved, d_out, dq, dk, dv, overwrite_q, overwrite_k, overwrite_v);
}

Tensor attention_qkv(const Tensor& qkv, int n_head, int n_kv_head) {
  LLMCC_PROFILE("attention.fwd");
  const AttentionLayout L = check_packed(qkv, n_head, n_kv_head);
  const float* p = qkv.f32();
  return forward(kOpQkv, L, p, p + L.packed_k_offset(), p + L.packed_v_offset(), nullptr);
}

Tensor attention_qkv_fwd(const Tensor& qkv, int n_head, int n_kv_head, AttentionSaved& saved) {
  LLMCC_PROFILE("attention.fwd");
  const AttentionLayout L = check_packed(qkv, n_head, n_kv_head);
  const float* p = qkv.f32();
  return forward(kOpQkv, L, p, p + L.packed_k_offset(), p + L.packed_v_offset(), &saved);
}

void attention_qkv_pullback(const Tensor& qkv, int n_head, int n_kv_head, const Tensor& out,
                            const AttentionSaved& saved, const Tensor& d_out, Tensor* d_qkv) {
  LLMCC_PROFILE("attention.bwd");
  const AttentionLayout L = check_packed(qkv, n_head, n_kv_head);
  check_saved(kOpQkv, L, out, saved, d_out);
  check::adjoint(kOpQkv, "d_qkv", d_qkv, qkv);
  if (!d_qkv) return;
  const float* p = qkv.f32();
  bool overwrite = false;
  float* d = adjoint_data(d_qkv, &overwrite);  // (B, T, (NH + 2 NKV) * HS)
  backward(L, p, p + L.packed_k_offset(), p + L.packed_v_offset(), out, saved, d_out, d, d + L.packed_k_offset(),
           d + L.packed_v_offset(), overwrite, overwrite, overwrite);
}

namespace {

// Checks what the tangents' pullbacks read besides their inputs: out and d_out (B, T, NH*HS).
void check_out(const char* op, const AttentionLayout& L, const Tensor& out, const Tensor& d_out) {
  check::ndim(op, "out", out, 3, "(B, T, n_head * HS)");
  check::dim(op, "out", out, 0, L.B, "B");
  check::dim(op, "out", out, 1, L.T, "T");
  check::dim(op, "out", out, 2, std::int64_t{L.NH} * L.HS, "n_head * HS");
  check::same_shape(op, "out", out, "d_out", d_out);
}

Tensor tangent_forward(const char* op, const AttentionLayout& L, const float* q, const float* k, const float* v,
                       const float* tq, const float* tk, const float* tv) {
  Tensor out = new_tensor({L.B, L.T, std::int64_t{L.NH} * L.HS}, op);  // (B, T, NH * HS)
  if (kernel_mode() == KernelMode::Reference) {
    ref::attention_tangent_forward(out.f32(), q, k, v, tq, tk, tv, L);
  } else {
    cpu::attention_tangent_forward(out.f32(), q, k, v, tq, tk, tv, L);
  }
  return out;
}

void tangent_backward(const AttentionLayout& L, float* dq, float* dk, float* dv, float* dtq, float* dtk, float* dtv,
                      const Tensor& d_out, const float* q, const float* k, const float* v, const float* tq,
                      const float* tk, const float* tv) {
  if (kernel_mode() == KernelMode::Reference) {
    ref::attention_tangent_backward(dq, dk, dv, dtq, dtk, dtv, d_out.f32(), q, k, v, tq, tk, tv, L);
  } else {
    cpu::attention_tangent_backward(dq, dk, dv, dtq, dtk, dtv, d_out.f32(), q, k, v, tq, tk, tv, L);
  }
}

float* data_of(Tensor* d) { return d ? d->f32() : nullptr; }  // pending zeros filled on first access

}  // namespace

Tensor attention_tangent(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& tq, const Tensor& tk,
                         const Tensor& tv, int n_head, int n_kv_head) {
  LLMCC_PROFILE("attention_tangent.fwd");
  const AttentionLayout L = check_inputs(q, k, v, n_head, n_kv_head);
  check::same_shape(kOp, "q", q, "tq", tq);
  check::same_shape(kOp, "k", k, "tk", tk);
  check::same_shape(kOp, "v", v, "tv", tv);
  return tangent_forward(kOp, L, q.f32(), k.f32(), v.f32(), tq.f32(), tk.f32(), tv.f32());
}

void attention_tangent_pullback(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& tq, const Tensor& tk,
                                const Tensor& tv, int n_head, int n_kv_head, const Tensor& out, const Tensor& d_out,
                                Tensor* d_q, Tensor* d_k, Tensor* d_v, Tensor* d_tq, Tensor* d_tk, Tensor* d_tv) {
  LLMCC_PROFILE("attention_tangent.bwd");
  const AttentionLayout L = check_inputs(q, k, v, n_head, n_kv_head);
  check::same_shape(kOp, "q", q, "tq", tq);
  check::same_shape(kOp, "k", k, "tk", tk);
  check::same_shape(kOp, "v", v, "tv", tv);
  check_out(kOp, L, out, d_out);
  check::adjoint(kOp, "d_q", d_q, q);
  check::adjoint(kOp, "d_k", d_k, k);
  check::adjoint(kOp, "d_v", d_v, v);
  check::adjoint(kOp, "d_tq", d_tq, tq);
  check::adjoint(kOp, "d_tk", d_tk, tk);
  check::adjoint(kOp, "d_tv", d_tv, tv);
  if (!d_q && !d_k && !d_v && !d_tq && !d_tk && !d_tv) return;
  tangent_backward(L, data_of(d_q), data_of(d_k), data_of(d_v), data_of(d_tq), data_of(d_tk), data_of(d_tv), d_out,
                   q.f32(), k.f32(), v.f32(), tq.f32(), tk.f32(), tv.f32());
}

Tensor attention_qkv_tangent(const Tensor& qkv, const Tensor& tqkv, int n_head, int n_kv_head) {
  LLMCC_PROFILE("attention_tangent.fwd");
  const AttentionLayout L = check_packed(qkv, n_head, n_kv_head);
  check::same_shape(kOpQkv, "qkv", qkv, "tqkv", tqkv);
  const float* p = qkv.f32();
  const float* t = tqkv.f32();
  return tangent_forward(kOpQkv, L, p, p + L.packed_k_offset(), p + L.packed_v_offset(), t, t + L.packed_k_offset(),
                         t + L.packed_v_offset());
}

void attention_qkv_tangent_pullback(const Tensor& qkv, const Tensor& tqkv, int n_head, int n_kv_head, const Tensor& out,
                                    const Tensor& d_out, Tensor* d_qkv, Tensor* d_tqkv) {
  LLMCC_PROFILE("attention_tangent.bwd");
  const AttentionLayout L = check_packed(qkv, n_head, n_kv_head);
  check::same_shape(kOpQkv, "qkv", qkv, "tqkv", tqkv);
  check_out(kOpQkv, L, out, d_out);
  check::adjoint(kOpQkv, "d_qkv", d_qkv, qkv);
  check::adjoint(kOpQkv, "d_tqkv", d_tqkv, tqkv);
  if (!d_qkv && !d_tqkv) return;
  const float* p = qkv.f32();
  const float* t = tqkv.f32();
  float* dp = data_of(d_qkv);
  float* dt = data_of(d_tqkv);
  const std::int64_t ko = L.packed_k_offset(), vo = L.packed_v_offset();
  tangent_backward(L, dp, dp ? dp + ko : nullptr, dp ? dp + vo : nullptr, dt, dt ? dt + ko : nullptr,
                   dt ? dt + vo : nullptr, d_out, p, p + ko, p + vo, t, t + ko, t + vo);
}

}  // namespace llmcc
