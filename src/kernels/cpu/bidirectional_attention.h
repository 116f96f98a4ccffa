// Fast kernels for bidirectional multi-head attention (layout as in
// kernels/ref/bidirectional_attention.h). Both are parallel over heads (b, h), so each thread
// owns the rows of d_k and d_v it accumulates into. A head's keys (and, backward, values) are
// first copied transposed into a per-thread (HS, T) buffer; then every product of a query row
// (its T scores, dO_i . v_j, its output, its d_q) is a weighted sum of contiguous rows whose
// partial sums stay in vector registers, 16 columns at a time. Per thread: 2 HS T + 2 T floats,
// kept across calls.
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// out (B, T, NH*HS), lse (B, NH, T) or null; q, k, v (B, T, NH*HS).
void bidirectional_attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, int B,
                                     int T, int NH, int HS);
// d_q, d_k, d_v (B, T, NH*HS) += their gradients; each may be null, and they may alias.
void bidirectional_attention_backward(float* d_q, float* d_k, float* d_v, const float* d_out, const float* q,
                                      const float* k, const float* v, const float* out, const float* lse, int B, int T,
                                      int NH, int HS);

}  // namespace llmcc::cpu
