// Fast kernels for scale (OpenMP over blocks, loops the compiler vectorises).
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// out = s * x  (n)
void scale_forward(float* out, const float* x, float s, std::int64_t n);
// d_x += s * d_out  (n);  *d_s += sum(d_out * x), summed in double. Null adjoints are skipped.
void scale_backward(float* d_x, float* d_s, const float* x, float s, const float* d_out, std::int64_t n);

}  // namespace llmcc::cpu
