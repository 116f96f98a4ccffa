// Fast kernels for mul (OpenMP over blocks, loops the compiler vectorises).
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// out = a * b  (n)
void mul_forward(float* out, const float* a, const float* b, std::int64_t n);
// d_a += d_out * b, d_b += d_out * a  (n); null adjoints are skipped; d_a == d_b allowed.
void mul_backward(float* d_a, float* d_b, const float* a, const float* b, const float* d_out, std::int64_t n);

}  // namespace llmcc::cpu
