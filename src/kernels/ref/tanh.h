// Reference kernels for tanh: scalar loops, templated on the scalar type so that gradient tests
// can run them in double.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// out[i] = tanh(x[i])  (n)
template <class T>
void tanh_forward(T* out, const T* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = std::tanh(x[i]);
}

// d_x[i] += d_out[i] * (1 - tanh(x[i])^2)  (n); a null d_x is skipped.
template <class T>
void tanh_backward(T* d_x, const T* x, const T* d_out, std::int64_t n) {
  if (!d_x) return;
  for (std::int64_t i = 0; i < n; ++i) {
    const T y = std::tanh(x[i]);
    d_x[i] += d_out[i] * (T(1) - y * y);
  }
}

// out[i] = t[i] (1 - y[i]^2)  (n)
template <class T>
void tanh_tangent_forward(T* out, const T* y, const T* t, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = t[i] * (T(1) - y[i] * y[i]);
}

// d_y[i] += -2 y t d_out, d_t[i] += (1 - y^2) d_out  (n); a null adjoint is skipped.
template <class T>
void tanh_tangent_backward(T* d_y, T* d_t, const T* y, const T* t, const T* d_out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    if (d_y) d_y[i] += T(-2) * y[i] * t[i] * d_out[i];
    if (d_t) d_t[i] += (T(1) - y[i] * y[i]) * d_out[i];
  }
}

// out[i] = tt (1 - y^2) - 2 y ty t  (n)
template <class T>
void tanh_tangent2_forward(T* out, const T* y, const T* t, const T* ty, const T* tt, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = tt[i] * (T(1) - y[i] * y[i]) - T(2) * y[i] * ty[i] * t[i];
}

// The four partials of tanh_tangent2 times d_out, accumulated  (n); a null adjoint is skipped.
template <class T>
void tanh_tangent2_backward(T* d_y, T* d_t, T* d_ty, T* d_tt, const T* y, const T* t, const T* ty, const T* tt,
                            const T* d_out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const T g = d_out[i];
    if (d_y) d_y[i] += T(-2) * (y[i] * tt[i] + ty[i] * t[i]) * g;
    if (d_t) d_t[i] += T(-2) * y[i] * ty[i] * g;
    if (d_ty) d_ty[i] += T(-2) * y[i] * t[i] * g;
    if (d_tt) d_tt[i] += (T(1) - y[i] * y[i]) * g;
  }
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
