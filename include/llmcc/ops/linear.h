// linear: a fully connected layer with PyTorch's weight layout, out = x @ w^T (+ b).
//
// The weight is stored (OC, C), one row per output channel, as torch.nn.Linear stores it, so
// Hugging Face / PyTorch checkpoints load without transposes. The same transposed-weight form is
// the tied GPT-2 LM head: logits = linear_nobias(x, wte) with wte (V, C) the token embedding
// table, and the head's adjoint d_w lands in wte's gradient alongside the embedding's.
#pragma once

#include "llmcc/tensor.h"

namespace llmcc {

// x: (N, C) or (B, T, C); w: (OC, C); b: (OC).
// out: (N, OC) or (B, T, OC), out[n, o] = b[o] + sum_c x[n, c] * w[o, c].
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);

// d_x (like x)  += d_out . w          (N, OC) x (OC, C)
// d_w (OC, C)   += d_out^T . x        (OC, N) x (N, C)
// d_b (OC)      += sum over rows of d_out
// d_out is shaped like out. A null adjoint is skipped together with the GEMM that only it needs.
void linear_pullback(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& out, const Tensor& d_out,
                     Tensor* d_x, Tensor* d_w, Tensor* d_b);

// linear without a bias (the LM head, Llama's projections): out = x @ w^T.
// x: (N, C) or (B, T, C); w: (OC, C); out: (N, OC) or (B, T, OC).
Tensor linear_nobias(const Tensor& x, const Tensor& w);

// d_x += d_out . w, d_w += d_out^T . x; null adjoints are skipped.
void linear_nobias_pullback(const Tensor& x, const Tensor& w, const Tensor& out, const Tensor& d_out, Tensor* d_x,
                            Tensor* d_w);

}  // namespace llmcc
