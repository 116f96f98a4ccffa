// Fast kernels for causal grouped-query attention on float (flash-style, OpenMP + SIMD).
//
// Layout: see kernels/attention_layout.h (rows at a stride, so q, k, v may be slices of one
// packed qkv tensor); lse (B, NH, T) dense. Query head h uses kv head h / (NH / NKV); scores
// s_ij = q_i . k_j / sqrt(HS) for j <= i.
#pragma once

#include "kernels/attention_layout.h"

namespace llmcc::cpu {

// Online softmax per query row over tiles of keys: no T x T matrix, O(1) state per row beyond
// the output row (used as the accumulator). lse may be null. OpenMP over (b, head, query tile).
void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const AttentionLayout& L);

// Recomputes probabilities from lse and accumulates into d_q, d_k, d_v (null ones skipped; they
// may alias each other). OpenMP over (b, kv head): all writes to one kv head's dK/dV and to its
// query heads' dQ come from one thread, so GQA needs no atomics or per-thread buffers.
void attention_backward(float* d_q, float* d_k, float* d_v, const float* d_out, const float* q,
                        const float* k, const float* v, const float* out, const float* lse,
                        const AttentionLayout& L);

}  // namespace llmcc::cpu
