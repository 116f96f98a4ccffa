// Fast kernels for rmsnorm on float: OpenMP over rows, SIMD reductions within a row.
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// out = x * rstd * w per row.  x, out: (N, C); w: (C); rstd: (N), written unless null.
void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, float eps, std::int64_t N,
                     std::int64_t C);

// Same maths as ref::rmsnorm_backward; null adjoints are skipped. d_w is summed over rows in
// per-thread partial buffers taken from the current arena (needs an ArenaScope), then added in
// thread order: deterministic for a fixed thread count.
void rmsnorm_backward(float* d_x, float* d_w, const float* d_out, const float* x, const float* w, const float* rstd,
                      std::int64_t N, std::int64_t C);

}  // namespace llmcc::cpu
