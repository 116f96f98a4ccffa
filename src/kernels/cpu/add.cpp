#include "kernels/cpu/add.h"

#include <cstring>

#include "kernels/cpu/parallel.h"

namespace llmcc::cpu {
namespace {

// Memory-bound: below this a thread team costs more than it saves.
constexpr std::int64_t kParallelMin = 32768;

// d += d_out, or d = d_out when overwrite  (n)
void accumulate(float* d, const float* __restrict d_out, std::int64_t n, bool overwrite) {
  parallel_for(
      n, n > kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
        if (overwrite) {
          std::memcpy(d + begin, d_out + begin, sizeof(float) * static_cast<std::size_t>(end - begin));
          return;
        }
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) d[i] += d_out[i];
      },
      kLineFloats);
}

}  // namespace

void add_forward(float* __restrict out, const float* __restrict a, const float* __restrict b, std::int64_t n) {
  parallel_for(
      n, n > kParallelMin,
      [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
      },
      kLineFloats);
}

void add_backward(float* d_a, float* d_b, const float* __restrict d_out, std::int64_t n, bool overwrite_a,
                  bool overwrite_b) {
  if (d_a) accumulate(d_a, d_out, n, overwrite_a);
  if (d_b) accumulate(d_b, d_out, n, overwrite_b);
}

}  // namespace llmcc::cpu
