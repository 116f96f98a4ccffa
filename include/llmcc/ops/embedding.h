// Embedding lookups: token_embedding (Llama: a row of wte per token) and
// token_position_embedding (GPT-2's encoder: a row of wte per token plus a row of wpe per
// position). Token ids get no adjoint; the weight adjoints are scatter-adds. wte and wpe may be
// stored in bf16 (a LoRA model's frozen base, Model::store_base_in_bf16): they are read widened to
// f32 and get no adjoint (d_wte, d_wpe null).
#pragma once

#include "llmcc/tensor.h"

namespace llmcc {

// out[b, t, :] = wte[idx[b, t], :].  idx: (B, T) ids in [0, V); wte: (V, C); out: (B, T, C).
Tensor token_embedding(const Tokens& idx, const Tensor& wte);

// d_wte[idx[b, t], :] += d_out[b, t, :] (a row repeated in idx gets the sum of its d_out rows).
// d_out: (B, T, C); d_wte: (V, C) or null (skipped). `out` is not read.
void token_embedding_pullback(const Tokens& idx, const Tensor& wte, const Tensor& out, const Tensor& d_out,
                              Tensor* d_wte);

// out[b, t, :] = wte[idx[b, t], :] + wpe[t, :].
// idx: (B, T) ids in [0, V) with T <= maxT; wte: (V, C); wpe: (maxT, C); out: (B, T, C).
Tensor token_position_embedding(const Tokens& idx, const Tensor& wte, const Tensor& wpe);

// d_wte[idx[b, t], :] += d_out[b, t, :];  d_wpe[t, :] += sum_b d_out[b, t, :] (rows t >= T of
// d_wpe unchanged). d_out: (B, T, C); d_wte: (V, C), d_wpe: (maxT, C), each may be null
// (skipped); they may be the same tensor when wte and wpe are. `out` is not read.
void token_position_embedding_pullback(const Tokens& idx, const Tensor& wte, const Tensor& wpe, const Tensor& out,
                                       const Tensor& d_out, Tensor* d_wte, Tensor* d_wpe);

}  // namespace llmcc
