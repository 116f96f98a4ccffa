// Fast kernels for gelu (tanh approximation; OpenMP over blocks, vectorised loops).
// They use 0.5 (1 + tanh(u)) = sigmoid(2u), which needs one exp and no tanh, and has no
// cancellation for negative x. Within atol 1e-6 + rtol 1e-5 of the reference (tested).
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// out = 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)  (n)
void gelu_forward(float* out, const float* x, std::int64_t n);
// d_x += d_out * gelu'(x)  (n), or d_x = when overwrite (d_x's old contents are not read);
// a null d_x is skipped.
void gelu_backward(float* d_x, const float* x, const float* d_out, std::int64_t n, bool overwrite = false);

}  // namespace llmcc::cpu
