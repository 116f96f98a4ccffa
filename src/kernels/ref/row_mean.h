// Reference kernels for row_mean: scalar loops, templated on the scalar type so that gradient
// tests can run them in double.
#pragma once

#include <cstdint>

#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// out[r] = (1 / C) sum_c x[r, c].  x: (R, C); out: (R).
template <class Real>
void row_mean_forward(Real* out, const Real* x, std::int64_t R, std::int64_t C) {
  for (std::int64_t r = 0; r < R; ++r) {
    Real sum = 0;
    for (std::int64_t c = 0; c < C; ++c) sum += x[r * C + c];
    out[r] = sum / static_cast<Real>(C);
  }
}

// d_x[r, c] += d_out[r] / C.  d_out: (R); d_x: (R, C).
template <class Real>
void row_mean_backward(Real* d_x, const Real* d_out, std::int64_t R, std::int64_t C) {
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t c = 0; c < C; ++c) d_x[r * C + c] += d_out[r] / static_cast<Real>(C);
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
