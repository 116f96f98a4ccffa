// Fast kernels for row_mean: OpenMP over rows, each row's sum in a fixed order (ordered_sum.h).
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// out[r] = (1 / C) sum_c x[r, c].  x: (R, C); out: (R).
void row_mean_forward(float* out, const float* x, std::int64_t R, std::int64_t C);
// d_x[r, c] += d_out[r] / C, or = when `overwrite` (d_x's zeros are pending).  d_out: (R);
// d_x: (R, C).
void row_mean_backward(float* d_x, const float* d_out, std::int64_t R, std::int64_t C, bool overwrite);

}  // namespace llmcc::cpu
