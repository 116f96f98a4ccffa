// attention: fused causal multi-head self-attention with grouped-query heads (GQA).
//
// Query head h (0 <= h < n_head) attends with key/value head h / (n_head / n_kv_head), so
// n_kv_head == n_head is ordinary multi-head attention and n_kv_head == 1 is multi-query
// attention. Query t sees keys 0..t (causal), scores are scaled by 1/sqrt(HS).
//
// Shapes (HS = C / n_head, the head size; heads are contiguous HS-wide slices of the last dim):
//   q   (B, T, n_head * HS)
//   k   (B, T, n_kv_head * HS)
//   v   (B, T, n_kv_head * HS)      the same shape as k
//   out (B, T, n_head * HS)         heads concatenated per token, ready for the output projection
//
// attention_qkv is the same op on one packed tensor, as GPT-2's fused c_attn linear produces:
//   qkv (B, T, (n_head + 2 * n_kv_head) * HS), each token's row laid out as
//       [n_head query heads | n_kv_head key heads | n_kv_head value heads]
//   out (B, T, n_head * HS)
// The kernels read q, k, v (and write their adjoints) in place through row strides: no copies.
//
// Flash-style: the forward keeps an online softmax per query row and never forms a T x T matrix;
// it saves only the log-sum-exp of each row, from which the backward recomputes probabilities.
#pragma once

#include "llmcc/tensor.h"

namespace llmcc {

struct AttentionSaved {
  Tensor lse;  // (B, n_head, T): log(sum_{j<=t} exp(s_tj)), s_tj = q_t . k_j / sqrt(HS)
};

// The forward alone (saves nothing).
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int n_head, int n_kv_head);

// The forward, recording in `saved` what attention_pullback needs besides the inputs and output.
Tensor attention_fwd(const Tensor& q, const Tensor& k, const Tensor& v, int n_head, int n_kv_head,
                     AttentionSaved& saved);

// d_q += dL/dq, d_k += dL/dk, d_v += dL/dv given d_out = dL/dout (B, T, n_head * HS); a null
// adjoint is skipped. The adjoints may alias each other (attention(x, x, x)). Allocates nothing
// from the arena.
void attention_pullback(const Tensor& q, const Tensor& k, const Tensor& v, int n_head, int n_kv_head, const Tensor& out,
                        const AttentionSaved& saved, const Tensor& d_out, Tensor* d_q, Tensor* d_k, Tensor* d_v);

// attention on q, k, v packed in one tensor qkv (B, T, (n_head + 2 * n_kv_head) * HS).
Tensor attention_qkv(const Tensor& qkv, int n_head, int n_kv_head);

// The forward, recording in `saved` what attention_qkv_pullback needs besides the input and
// output (the same record as attention_fwd's).
Tensor attention_qkv_fwd(const Tensor& qkv, int n_head, int n_kv_head, AttentionSaved& saved);

// d_qkv += dL/dqkv given d_out = dL/dout (B, T, n_head * HS); a null d_qkv is skipped.
// Allocates nothing from the arena.
void attention_qkv_pullback(const Tensor& qkv, int n_head, int n_kv_head, const Tensor& out,
                            const AttentionSaved& saved, const Tensor& d_out, Tensor* d_qkv);

// The tangent of attention(q, k, v, ...) along (tq, tk, tv), for adgen's forward mode: with
// s_ij the scores, s'_ij = (tq_i . k_j + q_i . tk_j) / sqrt(HS) their tangents and p_ij the
// probabilities, out'_i = sum_{j<=i} p_ij (s'_ij - sum_l p_il s'_il) v_j + p_ij tv_j.
// tq, tk, tv: the shapes of q, k, v; out: (B, T, n_head * HS).
Tensor attention_tangent(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& tq, const Tensor& tk,
                         const Tensor& tv, int n_head, int n_kv_head);
// Adds dL/d(each of the six) given d_out = dL/dout; a null adjoint is skipped, and adjoints may
// alias each other. `out` is not read.
void attention_tangent_pullback(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& tq, const Tensor& tk,
                                const Tensor& tv, int n_head, int n_kv_head, const Tensor& out, const Tensor& d_out,
                                Tensor* d_q, Tensor* d_k, Tensor* d_v, Tensor* d_tq, Tensor* d_tk, Tensor* d_tv);
// The same on packed qkv and its tangent tqkv (qkv's shape).
Tensor attention_qkv_tangent(const Tensor& qkv, const Tensor& tqkv, int n_head, int n_kv_head);
void attention_qkv_tangent_pullback(const Tensor& qkv, const Tensor& tqkv, int n_head, int n_kv_head, const Tensor& out,
                                    const Tensor& d_out, Tensor* d_qkv, Tensor* d_tqkv);

}  // namespace llmcc
