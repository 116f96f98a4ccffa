// Fast kernels for mean_pool: OpenMP over the batch, the channel loop vectorised.
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// out[b, c] = (1 / T) sum_t x[b, t, c].  x: (B, T, C); out: (B, C).
void mean_pool_forward(float* out, const float* x, std::int64_t B, std::int64_t T, std::int64_t C);
// d_x[b, t, c] += d_out[b, c] / T, or = when `overwrite` (d_x's zeros are pending).
// d_out: (B, C); d_x: (B, T, C).
void mean_pool_backward(float* d_x, const float* d_out, std::int64_t B, std::int64_t T, std::int64_t C, bool overwrite);

}  // namespace llmcc::cpu
