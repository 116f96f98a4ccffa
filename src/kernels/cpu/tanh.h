// Fast kernels for tanh (OpenMP over blocks, vectorised loops).
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// out = tanh(x)  (n)
void tanh_forward(float* out, const float* x, std::int64_t n);
// d_x += d_out * (1 - tanh(x)^2)  (n); a null d_x is skipped.
void tanh_backward(float* d_x, const float* x, const float* d_out, std::int64_t n);

// out = t (1 - y^2)  (n)
void tanh_tangent_forward(float* out, const float* y, const float* t, std::int64_t n);
// d_y += -2 y t d_out, d_t += (1 - y^2) d_out  (n); a null adjoint is skipped.
void tanh_tangent_backward(float* d_y, float* d_t, const float* y, const float* t, const float* d_out, std::int64_t n);
// out = tt (1 - y^2) - 2 y ty t  (n)
void tanh_tangent2_forward(float* out, const float* y, const float* t, const float* ty, const float* tt,
                           std::int64_t n);
// The four partials times d_out, accumulated (see ops/tanh.h)  (n); a null adjoint is skipped.
void tanh_tangent2_backward(float* d_y, float* d_t, float* d_ty, float* d_tt, const float* y, const float* t,
                            const float* ty, const float* tt, const float* d_out, std::int64_t n);

}  // namespace llmcc::cpu
