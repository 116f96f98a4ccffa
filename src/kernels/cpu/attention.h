// Fast kernels for causal grouped-query attention on float (flash-style, OpenMP + SIMD).
//
// Layout: see kernels/attention_layout.h (rows at a stride, so q, k, v may be slices of one
// packed qkv tensor); lse (B, NH, T) dense. Query head h uses kv head h / (NH / NKV); scores
// s_ij = q_i . k_j / sqrt(HS) for j <= i.
//
// Design. Queries and keys are cut into blocks of kBlock (48 with AVX2, 64 with AVX-512, 32
// without either). Every product is a small GEMM on a block pair, register-blocked over a
// micro-tile of C (6 x 16 floats with AVX2: 12 accumulators; 8 x 32 with AVX-512), broadcasting
// one element of A per row and loading contiguous rows of B. Q (and dO in the backward) is
// transposed once per block (per head in the backward); once a head has more than two blocks,
// the rows read as B (V, and K, Q, dO in the backward) are also copied dense, because in the
// activations they are thousands of bytes apart and crowd a few L1 sets:
//   S^T (keys, queries) = K_blk . (Q_blk^T / sqrt(HS))
// puts queries along the vector lanes, so the online softmax (running max, rescale, exp, row
// sum) is vertical vector arithmetic with a vectorised exp, never a horizontal reduction. P is
// then read back through swapped strides as the A operand of O += P V, dQ += dS K,
// dV += P^T dO and dK += dS^T Q. Causality: key blocks past a query block are never visited;
// on diagonal blocks each micro-tile is limited to the columns and depth the mask leaves
// non-zero, and masked scores are set to 0 (select, not multiply) before they are used.
// With bf16 products (AVX512_BF16) the same tiles run vdpbf16ps on bf16 pairs: Q^T and dO^T
// transposed at pair granularity, K and V rows converted or interleaved two at a time per key
// block, P and dS converted after the softmax; odd head sizes and block lengths are padded with
// zeros in both operands.
// Scratch is per thread, grown on first use and kept (no allocation in a steady state).

#pragma once

#include "kernels/attention_layout.h"

namespace llmcc::cpu {

// The operand precision of the products (S = Q K^T, O = P V and the backward's five). Bf16, where
// the build has AVX512_BF16: Q / sqrt(HS), K, V, P, dO and dS rounded to bf16 (bf16.h's rule),
// products summed in fp32 on vdpbf16ps; the softmax, lse, D = dO . O and every output stay fp32.
// Without AVX512_BF16, Bf16 runs as Fp32 (rounding would cost time and buy nothing).
enum class AttentionProducts { Fp32, Bf16 };
bool runs_bf16(AttentionProducts products);  // whether Bf16 runs as asked in this build

// Online softmax per query block over key blocks, O summed in a dense block of scratch, then
// written to the output rows normalised; lse = m + log(l) per row. lse may be null. OpenMP over (b, head, query block),
// dynamic, most expensive (last) blocks first.
void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, const AttentionLayout& L,
                       AttentionProducts products = AttentionProducts::Fp32);

// Recomputes P from lse and accumulates into d_q, d_k, d_v (null ones skipped: d_v alone skips
// dP and dS; they may alias each other). Per head: Q^T, dO^T and D_i = dO_i . O_i once; key
// blocks outermost, their dK and dV in scratch while every query block that sees them passes,
// dQ accumulated in place. OpenMP over (b, kv head): one thread writes one kv head's dK/dV and
// its query heads' dQ, so GQA needs no atomics or per-thread dQ buffers (B * NKV tasks: 48 for
// GPT-2 at B=4, plenty for a few threads). Where those tasks would leave threads idle (5 kv
// heads on 2 threads), OpenMP over (b, query head) instead: a group's first head adds into dK
// and dV, the others write partial rows (kept by the calling thread, B * NKV * (group - 1) *
// 2 * T * HS floats) that are added after a barrier in head order, so the sums are the same
// bits either way. An adjoint whose overwrite flag is set is written, not accumulated into:
// each task zeroes its own rows of it first, while they are about to be used (its old contents
// are never read).
void attention_backward(float* d_q, float* d_k, float* d_v, const float* d_out, const float* q, const float* k,
                        const float* v, const float* out, const float* lse, const AttentionLayout& L,
                        bool overwrite_q = false, bool overwrite_k = false, bool overwrite_v = false,
                        AttentionProducts products = AttentionProducts::Fp32);

}  // namespace llmcc::cpu
