// Reference kernels for add: scalar loops, templated on the scalar type so that gradient tests
// can run them in double.
#pragma once

#include <cstdint>

#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// out[i] = a[i] + b[i]  (n)
template <class T>
void add_forward(T* out, const T* a, const T* b, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// d_a[i] += d_out[i], d_b[i] += d_out[i]  (n); null adjoints are skipped.
template <class T>
void add_backward(T* d_a, T* d_b, const T* d_out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    if (d_a) d_a[i] += d_out[i];
    if (d_b) d_b[i] += d_out[i];
  }
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
