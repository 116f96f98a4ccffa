// Reference kernels for rmsnorm: scalar loops, templated on the scalar type so that gradient
// tests can run them in double.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// out = x * rstd * w per row, rstd = 1/sqrt(mean(x^2) + eps).  x, out: (N, C); w: (C);
// rstd: (N) is written unless null.
template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* w, T eps, std::int64_t N, std::int64_t C) {
  for (std::int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    T* yr = out + n * C;
    T ms = 0;
    for (std::int64_t i = 0; i < C; ++i) ms += xr[i] * xr[i];
    ms /= static_cast<T>(C);
    const T s = T(1) / std::sqrt(ms + eps);
    for (std::int64_t i = 0; i < C; ++i) yr[i] = xr[i] * s * w[i];
    if (rstd) rstd[n] = s;
  }
}

// With norm = x * rstd and g = w * d_out (per row):
//   d_x += rstd * (g - norm * mean_i(g * norm)),  d_w += d_out * norm.
// x, d_out, d_x: (N, C); w, d_w: (C); rstd: (N). Null adjoints are skipped.
template <class T>
void rmsnorm_backward(T* d_x, T* d_w, const T* d_out, const T* x, const T* w, const T* rstd, std::int64_t N,
                      std::int64_t C) {
  for (std::int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    const T* dyr = d_out + n * C;
    const T s = rstd[n];
    T gn_mean = 0;
    for (std::int64_t i = 0; i < C; ++i) {
      const T norm = xr[i] * s;
      gn_mean += w[i] * dyr[i] * norm;
      if (d_w) d_w[i] += dyr[i] * norm;
    }
    gn_mean /= static_cast<T>(C);
    if (!d_x) continue;
    T* dxr = d_x + n * C;
    for (std::int64_t i = 0; i < C; ++i) dxr[i] += s * (w[i] * dyr[i] - xr[i] * s * gn_mean);
  }
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
