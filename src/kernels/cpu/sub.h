// Fast kernels for sub, neg and rsub (OpenMP over blocks, loops the compiler vectorises).
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// out = a - b  (n)
void sub_forward(float* out, const float* a, const float* b, std::int64_t n);
// d_a += d_out, d_b -= d_out  (n), or = d_out and = -d_out for an adjoint whose overwrite flag is
// set; null adjoints are skipped.
void sub_backward(float* d_a, float* d_b, const float* d_out, std::int64_t n, bool overwrite_a = false,
                  bool overwrite_b = false);
// out = -x  (n)
void neg_forward(float* out, const float* x, std::int64_t n);
// d_x -= d_out  (n), or = -d_out with overwrite.
void neg_backward(float* d_x, const float* d_out, std::int64_t n, bool overwrite = false);
// out = s - x  (n)
void rsub_forward(float* out, float s, const float* x, std::int64_t n);
// *d_s += sum(d_out), summed in double in a fixed order (the thread count changes no bit);
// d_x -= d_out (n), or = -d_out with overwrite. Null adjoints are skipped.
void rsub_backward(float* d_s, float* d_x, const float* d_out, std::int64_t n, bool overwrite = false);

}  // namespace llmcc::cpu
