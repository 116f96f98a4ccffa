// Fast kernels for swiglu (OpenMP over blocks, vectorised loops).
#pragma once

#include <cstdint>

namespace llmcc::cpu {

// out = silu(g) * up  (n), silu(g) rounded to float first, as silu_forward then mul_forward.
void swiglu_forward(float* out, const float* g, const float* up, std::int64_t n);

// d_up += d_out * silu(g) and d_g += (d_out * up) * silu'(g)  (n), each product rounded as
// mul_backward then silu_backward round them; overwrite_*: write instead of add (the adjoint's
// old contents are not read). A null adjoint is skipped. d_g == d_up is allowed (overwrite_up
// then tells whether the first term writes): it receives the d_up term, then the d_g term.
void swiglu_backward(float* d_g, bool overwrite_g, float* d_up, bool overwrite_up, const float* g, const float* up,
                     const float* d_out, std::int64_t n);

}  // namespace llmcc::cpu
