// lora_linear: a linear map without bias and its LoRA update in one op,
//
//   out = x W^T + s (x A^T) B^T,    W (OC, C), A (R, C), B (OC, R), s = alpha / R (config).
//
// As linear_nobias(x, w) + s * linear_nobias(linear_nobias(x, a), b) but the update is added into
// the base product's output by the GEMM (beta 1) instead of being formed apart: of the three
// (N, OC) tensors the composition leaves in the arena (the base product, the update and their
// sum) one remains, and the rank-R intermediate x A^T (N, R) is the only thing saved besides the
// inputs. With W frozen (a null d_w) the pullback forms no (OC, C) product at all.
//
// With dropout (LoRA's, as PEFT's lora_dropout), the update reads x . m instead of x, m (N, C)
// holding 0 (probability p) or 1 / (1 - p), drawn from a hash of (seed, row, column): the same
// seed gives the same mask in the forward and the pullback, on any thread count, so nothing is
// saved for it. The base product reads x.
#pragma once

#include <cstdint>

#include "llmcc/tensor.h"

namespace llmcc {

// The adapter input's dropout: probability p in [0, 1) (0: none) and the seed of its mask.
struct LoraDropout {
  float p = 0.0f;
  std::uint64_t seed = 0;
};

// What the pullback reads besides the inputs: the rank-R intermediate.
struct LoraLinearSaved {
  Tensor xa;  // (N, R) = x A^T, N = product of x's leading dims
};

// x: (N, C) or (B, T, C); w: (OC, C); a: (R, C); b: (OC, R); out: (N, OC) or (B, T, OC).
Tensor lora_linear(const Tensor& x, const Tensor& w, const Tensor& a, const Tensor& b, float s);
// The same, also filling saved.xa from the current arena.
Tensor lora_linear_fwd(const Tensor& x, const Tensor& w, const Tensor& a, const Tensor& b, float s,
                       LoraLinearSaved& saved);
// With dropout on the update's input: out = x W^T + s ((x . m) A^T) B^T.
Tensor lora_linear(const Tensor& x, const Tensor& w, const Tensor& a, const Tensor& b, float s,
                   const LoraDropout& dropout);
Tensor lora_linear_fwd(const Tensor& x, const Tensor& w, const Tensor& a, const Tensor& b, float s,
                       const LoraDropout& dropout, LoraLinearSaved& saved);
// A map with a bias (OC, f32), added by the base product's GEMM: out = x W^T + bias + s ((x . m)
// A^T) B^T (GPT-2's maps).
Tensor lora_linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& a, const Tensor& b, float s,
                   const LoraDropout& dropout);
Tensor lora_linear_fwd(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& a, const Tensor& b, float s,
                       const LoraDropout& dropout, LoraLinearSaved& saved);

// With G = d_out B (N, R), formed in the current arena when d_x or d_a needs it:
//   d_x (like x) += d_out W + s G A      d_w (OC, C) += d_out^T x
//   d_a (R, C)   += s G^T x              d_b (OC, R) += s d_out^T (x A^T)
// A null adjoint is skipped with the products only it needs. `out` is not read.
void lora_linear_pullback(const Tensor& x, const Tensor& w, const Tensor& a, const Tensor& b, float s,
                          const Tensor& out, const LoraLinearSaved& saved, const Tensor& d_out, Tensor* d_x,
                          Tensor* d_w, Tensor* d_a, Tensor* d_b);
// With dropout: d_x += d_out W + s (G A) . m, d_a += s G^T (x . m), the others as above.
void lora_linear_pullback(const Tensor& x, const Tensor& w, const Tensor& a, const Tensor& b, float s,
                          const LoraDropout& dropout, const Tensor& out, const LoraLinearSaved& saved,
                          const Tensor& d_out, Tensor* d_x, Tensor* d_w, Tensor* d_a, Tensor* d_b);
// With a bias: d_bias (OC) += column sums of d_out, the others as above.
void lora_linear_pullback(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& a, const Tensor& b,
                          float s, const LoraDropout& dropout, const Tensor& out, const LoraLinearSaved& saved,
                          const Tensor& d_out, Tensor* d_x, Tensor* d_w, Tensor* d_bias, Tensor* d_a, Tensor* d_b);

}  // namespace llmcc
