// Fast kernels for lora_linear: the base product through linear's kernels, the rank-R products
// through cpu::gemm (or gemm_bf16 with the bf16 matmul dtype, as the base product), each
// accumulating into its destination (beta 1) so that no (N, OC) or (N, C) temporary exists.
//
// With dropout on the adapter's input (x replaced by x . m in the update's products, m the mask
// of kernels/cpu/dropout_mask.h), the masked rows are formed a block at a time in a buffer of the
// calling thread, kept from call to call: the forward's x m A^T, and in the backward the
// update's input gradient (masked before it is added) and d_a's x m.
#pragma once

#include <cstdint>

#include "kernels/cpu/dropout_mask.h"

namespace llmcc::cpu {

// The frozen weight W (OC, C): f32, or bf16 (linear.h's *_bf16w products); one of the two set.
struct LoraWeight {
  const float* f32 = nullptr;
  const std::uint16_t* bf16 = nullptr;
};

// xa (N, R) = (x . m) (N, C) . a (R, C)^T; out (N, OC) = x . w (OC, C)^T (+ bias (OC)) + s xa .
// b (OC, R)^T, m the dropout's mask (all ones without one), bias null for none.
void lora_linear_forward(float* out, float* xa, const float* x, LoraWeight w, const float* a, const float* b, float s,
                         std::int64_t N, std::int64_t C, std::int64_t OC, std::int64_t R, const Dropout& dropout = {},
                         const float* bias = nullptr);

// g (N, R) = d_out . b, written when non-null (needed when d_x or d_a is); then
// d_x (N, C) += d_out . w + s (g . a) . m (= with overwrite_dx), d_w (OC, C) += d_out^T . x,
// d_a (R, C) += s g^T . (x . m), d_b (OC, R) += s d_out^T . xa, d_bias (OC) += column sums of
// d_out. A null adjoint skips its products; d_w is null when w is bf16.
void lora_linear_backward(float* d_x, float* d_w, float* d_a, float* d_b, float* g, const float* d_out, const float* x,
                          LoraWeight w, const float* a, const float* b, const float* xa, float s, std::int64_t N,
                          std::int64_t C, std::int64_t OC, std::int64_t R, bool overwrite_dx,
                          const Dropout& dropout = {}, float* d_bias = nullptr);

}  // namespace llmcc::cpu
