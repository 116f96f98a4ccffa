#include "kernels/cpu/mul.h"

#include "kernels/cpu/parallel.h"

namespace llmcc::cpu {
namespace {

// Memory-bound like add: below this a thread team costs more than it saves.
constexpr std::int64_t kParallelMin = 32768;

// body(begin, end) over [0, n), in parallel when n is large enough.
template <class Body>
void elementwise(std::int64_t n, Body&& body) {
  parallel_for(n, n >= kParallelMin, body, kLineFloats);
}

// d += d_out * f  (n). No __restrict on d: the caller may pass d_out itself as d.
void accumulate_product(float* d, const float* f, const float* d_out, std::int64_t n) {
  elementwise(n, [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
    for (std::int64_t i = begin; i < end; ++i) d[i] += d_out[i] * f[i];
  });
}

}  // namespace

void mul_forward(float* __restrict out, const float* __restrict a, const float* __restrict b, std::int64_t n) {
  elementwise(n, [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
    for (std::int64_t i = begin; i < end; ++i) out[i] = a[i] * b[i];
  });
}

void mul_backward(float* d_a, float* d_b, const float* a, const float* b, const float* d_out, std::int64_t n) {
  if (d_a && d_a == d_b) {
    // x * x: one adjoint gets both terms, added in the reference's order, in one pass.
    elementwise(n, [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
      for (std::int64_t i = begin; i < end; ++i) d_a[i] = (d_a[i] + d_out[i] * b[i]) + d_out[i] * a[i];
    });
  } else if (d_a && d_b) {
    // Both active and distinct: one pass over d_out for both.
    elementwise(n, [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
      for (std::int64_t i = begin; i < end; ++i) {
        const float g = d_out[i];
        d_a[i] += g * b[i];
        d_b[i] += g * a[i];
      }
    });
  } else if (d_a) {
    accumulate_product(d_a, b, d_out, n);
  } else if (d_b) {
    accumulate_product(d_b, a, d_out, n);
  }
}

}  // namespace llmcc::cpu
