// Reference kernels for silu: scalar loops, templated on the scalar type so that gradient
// tests can run them in double.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// out[i] = x[i] * sigmoid(x[i])  (n)
template <class T>
void silu_forward(T* out, const T* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const T s = T(1) / (T(1) + std::exp(-x[i]));
    out[i] = x[i] * s;
  }
}

// d_x[i] += d_out[i] * (s + x s (1 - s)), s = sigmoid(x[i])  (n); a null d_x is skipped.
template <class T>
void silu_backward(T* d_x, const T* x, const T* d_out, std::int64_t n) {
  if (!d_x) return;
  for (std::int64_t i = 0; i < n; ++i) {
    const T s = T(1) / (T(1) + std::exp(-x[i]));
    d_x[i] += d_out[i] * (s + x[i] * s * (T(1) - s));
  }
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
