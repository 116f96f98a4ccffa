// Reference kernels for sub, neg and rsub: scalar loops, templated on the scalar type so that
// gradient tests can run them in double.
#pragma once

#include <cstdint>

#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// out[i] = a[i] - b[i]  (n)
template <class T>
void sub_forward(T* out, const T* a, const T* b, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = a[i] - b[i];
}

// d_a[i] += d_out[i], d_b[i] -= d_out[i]  (n); null adjoints are skipped.
template <class T>
void sub_backward(T* d_a, T* d_b, const T* d_out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    if (d_a) d_a[i] += d_out[i];
    if (d_b) d_b[i] -= d_out[i];
  }
}

// out[i] = -x[i]  (n)
template <class T>
void neg_forward(T* out, const T* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = -x[i];
}

// d_x[i] -= d_out[i]  (n)
template <class T>
void neg_backward(T* d_x, const T* d_out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) d_x[i] -= d_out[i];
}

// out[i] = s - x[i]  (n)
template <class T>
void rsub_forward(T* out, T s, const T* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = s - x[i];
}

// *d_s += sum(d_out) (accumulated in double), d_x[i] -= d_out[i]  (n); null adjoints are skipped.
template <class T>
void rsub_backward(T* d_s, T* d_x, const T* d_out, std::int64_t n) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    sum += static_cast<double>(d_out[i]);
    if (d_x) d_x[i] -= d_out[i];
  }
  if (d_s) *d_s += static_cast<T>(sum);
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
