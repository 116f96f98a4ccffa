// Fast kernels for lora_linear: the base product through linear's kernels (fp32 or the bf16
// matmul dtype), the rank-R products through cpu::gemm in fp32, each accumulating into its
// destination (beta 1) so that no (N, OC) or (N, C) temporary exists.
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// The frozen weight W (OC, C): f32, or bf16 (linear.h's *_bf16w products); one of the two set.
struct LoraWeight {
  const float* f32 = nullptr;
  const std::uint16_t* bf16 = nullptr;
};

// xa (N, R) = x (N, C) . a (R, C)^T; out (N, OC) = x . w (OC, C)^T + s xa . b (OC, R)^T.
void lora_linear_forward(float* out, float* xa, const float* x, LoraWeight w, const float* a, const float* b, float s,
                         std::int64_t N, std::int64_t C, std::int64_t OC, std::int64_t R);

// g (N, R) = d_out . b, written when non-null (needed when d_x or d_a is); then
// d_x (N, C) += d_out . w + s g . a (= with overwrite_dx), d_w (OC, C) += d_out^T . x,
// d_a (R, C) += s g^T . x, d_b (OC, R) += s d_out^T . xa. A null adjoint skips its products;
// d_w is null when w is bf16.
void lora_linear_backward(float* d_x, float* d_w, float* d_a, float* d_b, float* g, const float* d_out, const float* x,
                          LoraWeight w, const float* a, const float* b, const float* xa, float s, std::int64_t N,
                          std::int64_t C, std::int64_t OC, std::int64_t R, bool overwrite_dx);

}  // namespace llmcc::cpu
