// Reference kernels for linear: triple loops, templated on the scalar type so that gradient
// tests can run them in double. Weight layout (OC, C) as in PyTorch.
#pragma once

#include <cstdint>

#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// out (N, OC) = x (N, C) . w (OC, C)^T + b (OC); b may be null (no bias).
template <class T>
void linear_forward(T* out, const T* x, const T* w, const T* b, std::int64_t N, std::int64_t C, std::int64_t OC) {
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t o = 0; o < OC; ++o) {
      T acc = b ? b[o] : T(0);
      for (std::int64_t c = 0; c < C; ++c) acc += x[n * C + c] * w[o * C + c];
      out[n * OC + o] = acc;
    }
  }
}

// d_x (N, C) += d_out (N, OC) . w (OC, C); d_w (OC, C) += d_out^T . x (N, C);
// d_b (OC) += column sums of d_out. Null adjoints are skipped. Only primals and d_out are read,
// so aliasing adjoints (linear(x, x)) stay correct.
template <class T>
void linear_backward(T* d_x, T* d_w, T* d_b, const T* d_out, const T* x, const T* w, std::int64_t N, std::int64_t C,
                     std::int64_t OC) {
  if (d_x) {
    for (std::int64_t n = 0; n < N; ++n) {
      for (std::int64_t c = 0; c < C; ++c) {
        T acc = T(0);
        for (std::int64_t o = 0; o < OC; ++o) acc += d_out[n * OC + o] * w[o * C + c];
        d_x[n * C + c] += acc;
      }
    }
  }
  if (d_w) {
    for (std::int64_t o = 0; o < OC; ++o) {
      for (std::int64_t c = 0; c < C; ++c) {
        T acc = T(0);
        for (std::int64_t n = 0; n < N; ++n) acc += d_out[n * OC + o] * x[n * C + c];
        d_w[o * C + c] += acc;
      }
    }
  }
  if (d_b) {
    for (std::int64_t o = 0; o < OC; ++o) {
      T acc = T(0);
      for (std::int64_t n = 0; n < N; ++n) acc += d_out[n * OC + o];
      d_b[o] += acc;
    }
  }
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
