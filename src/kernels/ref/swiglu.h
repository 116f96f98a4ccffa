// Reference kernels for swiglu: scalar loops, templated on the scalar type so that gradient
// tests can run them in double.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// out[i] = g[i] * sigmoid(g[i]) * up[i]  (n)
template <class T>
void swiglu_forward(T* out, const T* g, const T* up, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const T s = T(1) / (T(1) + std::exp(-g[i]));
    out[i] = g[i] * s * up[i];
  }
}

// d_up[i] += d_out[i] * g[i] s, then d_g[i] += d_out[i] * up[i] * (s + g s (1 - s)), with
// s = sigmoid(g[i])  (n); a null adjoint is skipped; d_g == d_up allowed.
template <class T>
void swiglu_backward(T* d_g, T* d_up, const T* g, const T* up, const T* d_out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const T s = T(1) / (T(1) + std::exp(-g[i]));
    if (d_up) d_up[i] += d_out[i] * g[i] * s;
    if (d_g) d_g[i] += d_out[i] * up[i] * (s + g[i] * s * (T(1) - s));
  }
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
