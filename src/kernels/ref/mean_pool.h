// Reference kernels for mean_pool: scalar loops, templated on the scalar type so that gradient
// tests can run them in double.
#pragma once

#include <cstdint>

#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// out[b, c] = (1 / T) sum_t x[b, t, c].  x: (B, T, C); out: (B, C).
template <class Real>
void mean_pool_forward(Real* out, const Real* x, std::int64_t B, std::int64_t T, std::int64_t C) {
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t c = 0; c < C; ++c) {
      Real sum = 0;
      for (std::int64_t t = 0; t < T; ++t) sum += x[(b * T + t) * C + c];
      out[b * C + c] = sum / static_cast<Real>(T);
    }
  }
}

// d_x[b, t, c] += d_out[b, c] / T.  d_out: (B, C); d_x: (B, T, C).
template <class Real>
void mean_pool_backward(Real* d_x, const Real* d_out, std::int64_t B, std::int64_t T, std::int64_t C) {
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t c = 0; c < C; ++c) d_x[(b * T + t) * C + c] += d_out[b * C + c] / static_cast<Real>(T);
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
