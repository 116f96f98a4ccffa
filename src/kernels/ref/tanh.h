// Reference kernels for tanh: scalar loops, templated on the scalar type so that gradient tests
// can run them in double.
#pragma once

#include <cmath>
#include <cstdint>

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

}  // namespace llmcc::ref
