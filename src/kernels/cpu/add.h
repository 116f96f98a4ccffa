// Fast kernels for add (OpenMP over blocks, loops the compiler vectorises).
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// out = a + b  (n)
void add_forward(float* out, const float* a, const float* b, std::int64_t n);
// d_a += d_out, d_b += d_out  (n), or = (a copy) for an adjoint whose overwrite flag is set;
// null adjoints are skipped.
void add_backward(float* d_a, float* d_b, const float* d_out, std::int64_t n, bool overwrite_a = false,
                  bool overwrite_b = false);

}  // namespace llmcc::cpu
