// Reference kernels for gelu (tanh approximation, as GPT-2): scalar loops, templated on the
// scalar type so that gradient tests can run them in double.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// sqrt(2/pi) and the cubic coefficient of the tanh approximation.
template <class T>
constexpr T kGeluScale = T(0.7978845608028654);
template <class T>
constexpr T kGeluCubic = T(0.044715);

// out[i] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), x = x[i]  (n)
template <class T>
void gelu_forward(T* out, const T* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T t = std::tanh(kGeluScale<T> * (v + kGeluCubic<T> * v * v * v));
    out[i] = T(0.5) * v * (T(1) + t);
  }
}

// d_x[i] += d_out[i] * (0.5 (1 + t) + 0.5 x (1 - t^2) du/dx),
// t = tanh(u), du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)  (n); a null d_x is skipped.
template <class T>
void gelu_backward(T* d_x, const T* x, const T* d_out, std::int64_t n) {
  if (!d_x) return;
  for (std::int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T t = std::tanh(kGeluScale<T> * (v + kGeluCubic<T> * v * v * v));
    const T du = kGeluScale<T> * (T(1) + T(3) * kGeluCubic<T> * v * v);
    d_x[i] += d_out[i] * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * du);
  }
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
