// Fast kernels for tanh (OpenMP over blocks, vectorised loops).
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// out = tanh(x)  (n)
void tanh_forward(float* out, const float* x, std::int64_t n);
// d_x += d_out * (1 - tanh(x)^2)  (n); a null d_x is skipped.
void tanh_backward(float* d_x, const float* x, const float* d_out, std::int64_t n);

}  // namespace llmcc::cpu
