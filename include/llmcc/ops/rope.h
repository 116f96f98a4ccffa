// rope: rotary position embedding (Meta-Llama convention) applied to queries or keys.
#pragma once

#include "llmcc/tensor.h"

namespace llmcc {

// x, out: (B, T, n_head * HS), HS even. Within each head the pairs (x[2i], x[2i+1]),
// i < HS/2, are rotated by the angle p * theta^(-2i/HS) at position p = pos_offset + t:
//   out[2i]   = x[2i] * cos - x[2i+1] * sin
//   out[2i+1] = x[2i] * sin + x[2i+1] * cos
// theta > 0 (10000 in Llama 2) is config; pos_offset >= 0 is the position of t = 0 (the number
// of tokens already in a KV cache when generating).
Tensor rope(const Tensor& x, int n_head, float theta, int pos_offset);

// d_x += the inverse rotation of d_out (rope is orthogonal and linear in x); a null d_x is
// skipped. `out` is not read.
void rope_pullback(const Tensor& x, int n_head, float theta, int pos_offset, const Tensor& out,
                   const Tensor& d_out, Tensor* d_x);

}  // namespace llmcc
