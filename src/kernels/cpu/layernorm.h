// Fast kernels for layernorm on float: OpenMP over rows, SIMD reductions within a row.
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// out = (x - mean) * rstd * w + b per row.  x, out: (N, C); w, b: (C); mean, rstd: (N), each
// written unless null.
void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b,
                       std::int64_t N, std::int64_t C);

// Same maths as ref::layernorm_backward; null adjoints are skipped, d_w and d_b may alias.
// d_x is written instead of accumulated into when overwrite_dx.
// d_w/d_b are summed over rows in per-thread partial buffers taken from the current arena
// (needs an ArenaScope), then added in thread order: deterministic for a fixed thread count.
void layernorm_backward(float* d_x, float* d_w, float* d_b, const float* d_out, const float* x, const float* w,
                        const float* mean, const float* rstd, std::int64_t N, std::int64_t C,
                        bool overwrite_dx = false);

}  // namespace llmcc::cpu
