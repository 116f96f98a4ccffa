// swiglu: silu(g) * up, the gated activation of Llama's and Qwen3's MLPs, as one op: one pass over
// memory forward and one backward where silu then mul take two each, and nothing kept for the
// backward but g and up (mul would keep silu(g) as well).
#pragma once

#include "llmcc/tensor.h"

namespace llmcc {

// out = silu(g) * up = g * sigmoid(g) * up.  g, up, out: any shape, the same for all three.
// The fast kernel computes silu(g) then the product exactly as silu followed by mul do, so a
// model gives the same bits either way.
Tensor swiglu(const Tensor& g, const Tensor& up);

// d_g += d_out * up * silu'(g), d_up += d_out * silu(g), with silu'(g) = s (1 + g (1 - s)) and
// s = sigmoid(g); g, up, out, d_out, d_g, d_up: one shape. `out` is not read (silu(g) is
// recomputed from g). A null adjoint is skipped. d_g and d_up may be the same tensor
// (swiglu(x, x)): it then receives the d_up term, then the d_g term.
void swiglu_pullback(const Tensor& g, const Tensor& up, const Tensor& out, const Tensor& d_out, Tensor* d_g,
                     Tensor* d_up);

}  // namespace llmcc
