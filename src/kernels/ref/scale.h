// Reference kernels for scale: scalar loops, templated on the scalar type so that gradient
// tests can run them in double.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// out[i] = s * x[i]  (n)
template <class T>
void scale_forward(T* out, const T* x, T s, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = s * x[i];
}

// d_x[i] += s * d_out[i]  (n);  *d_s += sum_i d_out[i] * x[i], summed in order in at least
// double precision. Null adjoints are skipped.
template <class T>
void scale_backward(T* d_x, T* d_s, const T* x, T s, const T* d_out, std::int64_t n) {
  if (d_x) {
    for (std::int64_t i = 0; i < n; ++i) d_x[i] += s * d_out[i];
  }
  if (d_s) {
    std::common_type_t<T, double> sum = 0;
    for (std::int64_t i = 0; i < n; ++i) sum += static_cast<decltype(sum)>(d_out[i]) * x[i];
    *d_s += static_cast<T>(sum);
  }
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
