// Reference kernels for layernorm: scalar loops, templated on the scalar type so that gradient
// tests can run them in double.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// GPT-2's epsilon; shared with the fast kernel.
inline constexpr double kLayerNormEps = 1e-5;

// out = (x - mean) * rstd * w + b per row.  x, out: (N, C); w, b: (C); mean, rstd: (N) are
// written unless null (the primal-only forward does not keep them).
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* w, const T* b, std::int64_t N, std::int64_t C) {
  for (std::int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    T* yr = out + n * C;
    T m = 0;
    for (std::int64_t i = 0; i < C; ++i) m += xr[i];
    m /= static_cast<T>(C);
    T v = 0;
    for (std::int64_t i = 0; i < C; ++i) v += (xr[i] - m) * (xr[i] - m);
    v /= static_cast<T>(C);
    const T s = T(1) / std::sqrt(v + static_cast<T>(kLayerNormEps));
    for (std::int64_t i = 0; i < C; ++i) yr[i] = (xr[i] - m) * s * w[i] + b[i];
    if (mean) mean[n] = m;
    if (rstd) rstd[n] = s;
  }
}

// With norm = (x - mean) * rstd and g = w * d_out (per row):
//   d_x += rstd * (g - mean_i(g) - norm * mean_i(g * norm)),  d_w += d_out * norm,  d_b += d_out.
// x, d_out, d_x: (N, C); w, d_w, d_b: (C); mean, rstd: (N). Null adjoints are skipped; d_w and
// d_b may alias.
template <class T>
void layernorm_backward(T* d_x, T* d_w, T* d_b, const T* d_out, const T* x, const T* w, const T* mean, const T* rstd,
                        std::int64_t N, std::int64_t C) {
  for (std::int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    const T* dyr = d_out + n * C;
    const T m = mean[n], s = rstd[n];
    T g_mean = 0, gn_mean = 0;
    for (std::int64_t i = 0; i < C; ++i) {
      const T norm = (xr[i] - m) * s;
      const T g = w[i] * dyr[i];
      g_mean += g;
      gn_mean += g * norm;
      if (d_w) d_w[i] += dyr[i] * norm;
      if (d_b) d_b[i] += dyr[i];
    }
    g_mean /= static_cast<T>(C);
    gn_mean /= static_cast<T>(C);
    if (!d_x) continue;
    T* dxr = d_x + n * C;
    for (std::int64_t i = 0; i < C; ++i) {
      const T norm = (xr[i] - m) * s;
      dxr[i] += s * (w[i] * dyr[i] - g_mean - norm * gn_mean);
    }
  }
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
