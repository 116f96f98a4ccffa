// bidirectional_attention: multi-head self-attention in which every query sees every key (an
// encoder's attention: BERT, ViT), where `attention` (attention.h) is causal.
//
// Shapes (HS = C / n_head, the head size; heads are contiguous HS-wide slices of the last dim):
//   q, k, v, out  (B, T, n_head * HS)
// Query t of head h attends to keys 0..T-1 of head h with scores q_t . k_j / sqrt(HS).
// The forward saves only each row's log-sum-exp; the backward recomputes the probabilities from
// it. The kernels hold one row of T scores per thread, never a T x T matrix.
#pragma once

#include "llmcc/tensor.h"

namespace llmcc {

struct BidirectionalAttentionSaved {
  Tensor lse;  // (B, n_head, T): log(sum_{j<T} exp(s_tj)), s_tj = q_t . k_j / sqrt(HS)
};

// out_t = sum_j softmax_j(s_t.) v_j, per head.
Tensor bidirectional_attention(const Tensor& q, const Tensor& k, const Tensor& v, int n_head);

// The forward, recording in `saved` what the pullback needs besides the inputs and output.
Tensor bidirectional_attention_fwd(const Tensor& q, const Tensor& k, const Tensor& v, int n_head,
                                   BidirectionalAttentionSaved& saved);

// d_q += dL/dq, d_k += dL/dk, d_v += dL/dv given d_out = dL/dout (B, T, n_head * HS); a null
// adjoint is skipped. The adjoints may alias each other (bidirectional_attention(x, x, x)).
void bidirectional_attention_pullback(const Tensor& q, const Tensor& k, const Tensor& v, int n_head, const Tensor& out,
                                      const BidirectionalAttentionSaved& saved, const Tensor& d_out, Tensor* d_q,
                                      Tensor* d_k, Tensor* d_v);

}  // namespace llmcc
