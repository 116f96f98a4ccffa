// Fast kernels for silu (OpenMP over blocks, vectorised loops).
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// out = x * sigmoid(x)  (n)
void silu_forward(float* out, const float* x, std::int64_t n);
// d_x += d_out * silu'(x)  (n); a null d_x is skipped.
void silu_backward(float* d_x, const float* x, const float* d_out, std::int64_t n);

}  // namespace llmcc::cpu
