#include "kernels/cpu/sub.h"

#include "kernels/cpu/ordered_sum.h"
#include "kernels/cpu/parallel.h"

namespace llmcc::cpu {
namespace {

// Memory-bound: below this a thread team costs more than it saves.
constexpr std::int64_t kParallelMin = 32768;

// d += sign * d_out, or d = sign * d_out when overwrite  (n); sign is +1 or -1.
void accumulate(float* d, const float* __restrict d_out, std::int64_t n, float sign, bool overwrite) {
  parallel_for(
      n, n > kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
        if (overwrite) {
#pragma omp simd
          for (std::int64_t i = begin; i < end; ++i) d[i] = sign * d_out[i];
        } else {
#pragma omp simd
          for (std::int64_t i = begin; i < end; ++i) d[i] += sign * d_out[i];
        }
      },
      kLineFloats);
}

}  // namespace

void sub_forward(float* __restrict out, const float* __restrict a, const float* __restrict b, std::int64_t n) {
  parallel_for(
      n, n > kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) out[i] = a[i] - b[i];
      },
      kLineFloats);
}

void sub_backward(float* d_a, float* d_b, const float* __restrict d_out, std::int64_t n, bool overwrite_a,
                  bool overwrite_b) {
  if (d_a) accumulate(d_a, d_out, n, 1.0f, overwrite_a);
  if (d_b) accumulate(d_b, d_out, n, -1.0f, overwrite_b);
}

void neg_forward(float* __restrict out, const float* __restrict x, std::int64_t n) {
  parallel_for(
      n, n > kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) out[i] = -x[i];
      },
      kLineFloats);
}

void neg_backward(float* d_x, const float* __restrict d_out, std::int64_t n, bool overwrite) {
  accumulate(d_x, d_out, n, -1.0f, overwrite);
}

void rsub_forward(float* __restrict out, float s, const float* __restrict x, std::int64_t n) {
  parallel_for(
      n, n > kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) out[i] = s - x[i];
      },
      kLineFloats);
}

void rsub_backward(float* d_s, float* d_x, const float* __restrict d_out, std::int64_t n, bool overwrite) {
  if (d_s) {
    // In double: a float accumulator over a million elements would drift by ~n * eps.
    const double sum = parallel_ordered_sum<double>(n, n >= kParallelMin,
                                                    [&](std::int64_t i) { return static_cast<double>(d_out[i]); });
    *d_s += static_cast<float>(sum);
  }
  if (d_x) accumulate(d_x, d_out, n, -1.0f, overwrite);
}

}  // namespace llmcc::cpu
